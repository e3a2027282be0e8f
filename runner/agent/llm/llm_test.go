package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/egress"
	"github.com/clawguard/clawguard/runner/internal/modelgw"
	"github.com/clawguard/clawguard/runner/internal/modelgw/fakeprovider"
)

// The demo's LLM agent completes a task against the fake provider, reaching
// it only through the model gateway (served on a loopback listener, as the
// process runtime serves it; the environment an agent is given), its tool
// calls made through MCP. The guard behind the gateway is a table here
// (the real decisions: modelgw's gwe2e); the tools are a stand-in for
// clawguard-mcp, recording what the model asked.

// The model's three turns: list the destinations, greet one, answer.
func script(body map[string]any) string {
	msgs, _ := body["messages"].([]any)
	tool := func(id, name, input string) string {
		return fmt.Sprintf(`{"id":"msg_%d","type":"message","role":"assistant","model":"claude-sonnet-4-5","stop_reason":"tool_use","stop_sequence":null,`+
			`"content":[{"type":"text","text":"Let me check."},{"type":"tool_use","id":%q,"name":%q,"input":%s}],"usage":{"input_tokens":50,"output_tokens":20}}`,
			len(msgs), id, name, input)
	}
	switch len(msgs) {
	case 1:
		return tool("toolu_1", "list_destinations", `{}`)
	case 3:
		return tool("toolu_2", "send_message", `{"to":"helper","text":"hello from the llm agent"}`)
	}
	return `{"id":"msg_5","type":"message","role":"assistant","model":"claude-sonnet-4-5","stop_reason":"end_turn","stop_sequence":null,` +
		`"content":[{"type":"text","text":"I greeted helper; the guard held the message for approval."}],"usage":{"input_tokens":80,"output_tokens":15}}`
}

// tools stands in for clawguard-mcp: two delivery actions' tools.
type tools struct {
	mu    sync.Mutex
	calls []string
}

func (tl *tools) serve(t *testing.T) *mcp.ClientSession {
	s := mcp.NewServer(&mcp.Implementation{Name: "clawguard-mcp-standin", Version: "1"}, nil)
	record := func(name string) mcp.ToolHandler {
		return func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			tl.mu.Lock()
			tl.calls = append(tl.calls, name+" "+string(req.Params.Arguments))
			tl.mu.Unlock()
			text := `["helper"]`
			if name == "send_message" {
				text = "HELD: hold h_1; an admin of agent group demo may approve it"
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
		}
	}
	s.AddTool(&mcp.Tool{Name: "list_destinations", Description: "the groups you may message", InputSchema: map[string]any{"type": "object"}}, record("list_destinations"))
	s.AddTool(&mcp.Tool{Name: "send_message", Description: "message a destination", InputSchema: map[string]any{"type": "object",
		"properties": map[string]any{"to": map[string]any{"type": "string"}, "text": map[string]any{"type": "string"}}, "required": []any{"to", "text"}}},
		record("send_message"))
	st, ct := mcp.NewInMemoryTransports()
	if _, err := s.Connect(context.Background(), st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestTheLLMAgentCompletesATaskThroughTheGateway(t *testing.T) {
	ca := fakeprovider.NewCA(t)
	p := fakeprovider.New(t, ca)
	p.Script = script
	transport, err := modelgw.ProviderTransport(ca.Bundle)
	if err != nil {
		t.Fatal(err)
	}
	models := &routeTo{route: &guardv1.GetModelRouteResponse{Provider: "anthropic", BaseUrl: p.URL, Credential: p.Keys["anthropic"]}}
	gw, err := modelgw.New(modelgw.Config{Guard: allowAll{}, Models: models, Transport: transport, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := egress.New(egress.Config{Decider: allowAll{}, Awaiter: allowAll{}, Policy: &egress.AddressPolicy{}, Limits: egress.DefaultLimits,
		Log: slog.New(slog.DiscardHandler), Origin: gw.Handler})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	token := gw.Open("s1")
	proxy.Serve(egress.Session{ID: "s1", GroupID: "ag_demo"}, ln)
	t.Cleanup(func() { proxy.Stop("s1", "test over") })
	for k, v := range modelgw.Env("http://"+ln.Addr().String(), token) {
		t.Setenv(k, v)
	}
	m, err := newModel(func(k string) string { return map[string]string{"ANTHROPIC_BASE_URL": "set"}[k] })
	if err != nil {
		t.Fatal(err)
	}
	tl := &tools{}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	answer, err := loop(ctx, m, tl.serve(t), defaultTask, 6, &out)
	if err != nil {
		t.Fatalf("the loop: %v\n%s", err, out.String())
	}
	if !strings.Contains(answer, "greeted helper") {
		t.Fatalf("answer %q\n%s", answer, out.String())
	}
	if len(tl.calls) != 2 || !strings.HasPrefix(tl.calls[0], "list_destinations") || !strings.Contains(tl.calls[1], `"to":"helper"`) {
		t.Fatalf("tool calls: %v", tl.calls)
	}
	reqs := p.Requests()
	if len(reqs) != 3 {
		t.Fatalf("the provider got %d calls, want 3", len(reqs))
	}
	last, _ := json.Marshal(reqs[2].Body["messages"])
	if !strings.Contains(string(last), "HELD: hold h_1") || reqs[0].Body["tools"] == nil {
		t.Fatalf("the model was not given its tools or their results: %s", last)
	}
	for _, q := range reqs {
		if q.Header.Get("X-Api-Key") != p.Keys["anthropic"] || strings.Contains(q.Header.Get("Authorization"), token) {
			t.Fatal("the provider got the session's token, or not the real key")
		}
	}
	if models.settles() != 3 {
		t.Fatalf("%d calls settled, want 3", models.settles())
	}
}

type allowAll struct{}

func (allowAll) Decide(_ context.Context, req *guardv1.DecideRequest) (*guardv1.DecideResponse, error) {
	return &guardv1.DecideResponse{DecisionId: req.GetRequestId(), Decision: &guardv1.Decision{Effect: guardv1.Effect_EFFECT_ALLOW}}, nil
}

func (allowAll) Await(context.Context, string, time.Duration) (egress.Resolution, error) {
	return egress.Resolution{}, nil
}

func (allowAll) Connect(context.Context, egress.Session, egress.Dest) (egress.Verdict, error) {
	return egress.Verdict{Effect: guardv1.Effect_EFFECT_DENY}, nil
}

// routeTo routes every call to one provider and counts settles.
type routeTo struct {
	route *guardv1.GetModelRouteResponse
	mu    sync.Mutex
	n     int
	done  chan struct{}
}

func (r *routeTo) GetModelRoute(context.Context, *guardv1.GetModelRouteRequest, ...grpc.CallOption) (*guardv1.GetModelRouteResponse, error) {
	return r.route, nil
}

func (r *routeTo) ReserveModelUsage(_ context.Context, in *guardv1.ReserveModelUsageRequest, _ ...grpc.CallOption) (*guardv1.ReserveModelUsageResponse, error) {
	return &guardv1.ReserveModelUsageResponse{ReservationId: in.GetDecisionId()}, nil
}

func (r *routeTo) SettleModelUsage(context.Context, *guardv1.SettleModelUsageRequest, ...grpc.CallOption) (*guardv1.SettleModelUsageResponse, error) {
	r.mu.Lock()
	r.n++
	r.mu.Unlock()
	return &guardv1.SettleModelUsageResponse{Settled: true}, nil
}

// settles waits (a bounded while) for the settles, made off each call's path.
func (r *routeTo) settles() int {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		r.mu.Lock()
		n := r.n
		r.mu.Unlock()
		if n >= 3 {
			return n
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}
