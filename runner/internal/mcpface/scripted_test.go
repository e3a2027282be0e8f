package mcpface

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
)

// scriptedGateway is a runner's gateway scripted by the test, on a real
// unix socket: these tests are about what clawguard-mcp makes of its
// answers (the e2e tests run the real runner).
type scriptedGateway struct {
	agentv1.UnimplementedAgentGatewayServer
	mu       sync.Mutex
	actions  []*agentv1.ActionSpec
	tools    []*agentv1.McpTool // nil with noTools: ListTools is Unimplemented
	noTools  bool
	toolsErr error // ListTools fails with it
	sends    []*agentv1.SendRequest
	answer   func(*agentv1.SendRequest) *agentv1.SendResponse
	items    chan *agentv1.InboxResponse
	// noItemIDs: a runner from before acknowledged delivery (items carry
	// no item_id); else an item without one is given the next.
	noItemIDs bool
	nextID    int
	inboxReqs []*agentv1.InboxRequest
}

func (g *scriptedGateway) ListActions(context.Context, *agentv1.ListActionsRequest) (*agentv1.ListActionsResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return &agentv1.ListActionsResponse{Actions: g.actions}, nil
}

func (g *scriptedGateway) ListTools(context.Context, *agentv1.ListToolsRequest) (*agentv1.ListToolsResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.noTools {
		return nil, status.Error(codes.Unimplemented, "no guarded MCP servers")
	}
	if g.toolsErr != nil {
		return nil, g.toolsErr
	}
	return &agentv1.ListToolsResponse{Tools: g.tools}, nil
}

func (g *scriptedGateway) Send(_ context.Context, req *agentv1.SendRequest) (*agentv1.SendResponse, error) {
	g.mu.Lock()
	g.sends = append(g.sends, req)
	answer := g.answer
	g.mu.Unlock()
	return answer(req), nil
}

func (g *scriptedGateway) Inbox(req *agentv1.InboxRequest, s grpc.ServerStreamingServer[agentv1.InboxResponse]) error {
	g.mu.Lock()
	g.inboxReqs = append(g.inboxReqs, req)
	g.mu.Unlock()
	for {
		select {
		case it := <-g.items:
			g.mu.Lock()
			if it.ItemId == "" && !g.noItemIDs {
				g.nextID++
				it.ItemId = fmt.Sprintf("item_%d", g.nextID)
			}
			g.mu.Unlock()
			if err := s.Send(it); err != nil {
				return err
			}
		case <-s.Context().Done():
			return nil
		}
	}
}

func (g *scriptedGateway) lastSend() *agentv1.SendRequest {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.sends) == 0 {
		return nil
	}
	return g.sends[len(g.sends)-1]
}

func (g *scriptedGateway) notice(n *agentv1.Notice) {
	if n.At == nil {
		n.At = timestamppb.Now()
	}
	g.items <- &agentv1.InboxResponse{Item: &agentv1.InboxResponse_Notice{Notice: n}}
}

const installSchema = `{"type":"object","properties":{"apt":{"type":["array","null"],"items":{"type":"string"}}}}`

func newScripted() *scriptedGateway {
	return &scriptedGateway{
		actions: []*agentv1.ActionSpec{
			{Name: "install_packages", Description: "install", InputSchemaJson: installSchema, CatalogAction: "self_mod.install_packages"},
			{Name: "mcp_call", InputSchemaJson: `{"type":"object"}`, CatalogAction: "mcp.call"},
			{Name: "reply", InputSchemaJson: `{"type":"object","properties":{"text":{"type":"string"}}}`},
		},
		noTools: true,
		answer: func(*agentv1.SendRequest) *agentv1.SendResponse {
			return &agentv1.SendResponse{Status: agentv1.SendStatus_SEND_STATUS_DONE, Reason: "ok"}
		},
		items: make(chan *agentv1.InboxResponse, 16),
	}
}

// ackLog records acknowledged ids.
type ackLog struct {
	mu  sync.Mutex
	ids []string
}

func (a *ackLog) Ack(_ context.Context, ids []string) error {
	a.mu.Lock()
	a.ids = append(a.ids, ids...)
	a.mu.Unlock()
	return nil
}

func (a *ackLog) has(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Contains(a.ids, id)
}

func (a *ackLog) count(id string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, x := range a.ids {
		if x == id {
			n++
		}
	}
	return n
}

// notes collects what the host is told.
type notes struct {
	mu        sync.Mutex
	updated   int
	logs      []string
	toolsList int
}

func (n *notes) count(f func() int) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return f()
}

type harness struct {
	gw    *scriptedGateway
	face  *Face
	cs    *mcp.ClientSession
	acks  *ackLog
	notes *notes
}

// dialScripted serves gw on a fresh unix socket and dials it.
func dialScripted(tb testing.TB, gw *scriptedGateway) *grpc.ClientConn {
	tb.Helper()
	dir, err := os.MkdirTemp("", "cgmcp")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	ln, err := net.Listen("unix", filepath.Join(dir, "gw.sock"))
	if err != nil {
		tb.Fatal(err)
	}
	srv := grpc.NewServer()
	agentv1.RegisterAgentGatewayServer(srv, gw)
	go srv.Serve(ln)
	tb.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("unix://"+ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	return conn
}

func serve(t *testing.T, gw *scriptedGateway, protocol string) *harness {
	t.Helper()
	conn := dialScripted(t, gw)
	h := &harness{gw: gw, acks: &ackLog{}, notes: &notes{}}
	h.face = New(Config{Gateway: agentv1.NewAgentGatewayClient(conn), Acker: h.acks, CallWait: time.Second, MaxWait: 5 * time.Second,
		QueuePath: filepath.Join(t.TempDir(), "inbox.jsonl")})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, ct := mcp.NewInMemoryTransports()
	go h.face.Run(ctx, st)
	client := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			h.notes.mu.Lock()
			h.notes.toolsList++
			h.notes.mu.Unlock()
		},
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			if r.Params.URI == InboxURI {
				h.notes.mu.Lock()
				h.notes.updated++
				h.notes.mu.Unlock()
			}
		},
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			b, _ := json.Marshal(r.Params.Data)
			h.notes.mu.Lock()
			h.notes.logs = append(h.notes.logs, string(b))
			h.notes.mu.Unlock()
		},
	})
	cs, err := client.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: protocol})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	h.cs = cs
	return h
}

func (h *harness) call(t *testing.T, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := h.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func structured(t *testing.T, r *mcp.CallToolResult) map[string]any {
	t.Helper()
	b, _ := json.Marshal(r.StructuredContent)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
