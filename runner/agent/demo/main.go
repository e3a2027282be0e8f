// Command demo-agent is the demo agent: a static binary (image FROM scratch)
// that talks to its runner's agent gateway (CLAWGUARD_GATEWAY_SOCKET).
//
// On start it runs its script once per workspace, prints every answer,
// notice and message it gets (stdout: `docker logs`), appends them as JSON
// lines to $CLAWGUARD_WORKSPACE/events.jsonl, and answers messages from
// other agents and from chats (into the chat) with "got: <text>". A message "/do <step JSON>" runs that
// step. Script: CLAWGUARD_DEMO_SCRIPT (inline JSON, or a file path), else
// $CLAWGUARD_WORKSPACE/script.json, else a default that asks to install
// cowsay, lists groups and greets every destination. A step is
//
//	{"action": "install_packages", "payload": {"apt": ["cowsay"]}, "request_id": "optional"}
//
// or {"greet_destinations": true}, or, to exercise the runner's defences, {"flood": N} (N sends at once) and
// {"garbage": N} (N connections writing junk to the socket).
//
// It reads its inbox as an acknowledging agent: each item is recorded in
// events.jsonl (with its item_id), then acknowledged (AgentGateway.Ack). An
// item sent again — its ack was lost, or the agent died before sending it —
// is recognised by the item ids events.jsonl already holds, acknowledged
// again and not handled twice.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
	"github.com/clawguard/clawguard/proto/enumword"
)

// Step is one scripted action.
type Step struct {
	Action    string         `json:"action,omitempty"`
	Payload   map[string]any `json:"payload,omitempty"`
	RequestID string         `json:"request_id,omitempty"`
	Flood     int            `json:"flood,omitempty"`
	// Greet sends a message to every destination the agent's group has.
	Greet   bool `json:"greet_destinations,omitempty"`
	Garbage int  `json:"garbage,omitempty"`
}

var defaultScript = []Step{
	{Action: "install_packages", Payload: map[string]any{"apt": []any{"cowsay"}, "reason": "the demo wants a talking cow"}},
	{Action: "cli_request", Payload: map[string]any{"method": "ListGroups"}},
	{Greet: true},
}

type agent struct {
	client    agentv1.AgentGatewayClient
	socket    string
	workspace string
	mu        sync.Mutex
	events    *os.File
	seq       int
	handled   map[string]bool // inbox item ids recorded in events.jsonl
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "demo-agent:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	socket := os.Getenv("CLAWGUARD_GATEWAY_SOCKET")
	if socket == "" {
		return errors.New("CLAWGUARD_GATEWAY_SOCKET is not set")
	}
	ws := os.Getenv("CLAWGUARD_WORKSPACE")
	if ws == "" {
		ws = "."
	}
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	defer conn.Close()
	a := &agent{client: agentv1.NewAgentGatewayClient(conn), socket: socket, workspace: ws, handled: handledItems(ws)}
	if f, err := os.OpenFile(filepath.Join(ws, "events.jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
		a.events = f
		defer f.Close()
	}
	pkgs, _ := os.ReadFile("/etc/clawguard/packages.json")
	// The group's instructions (create_agent's), when it has any.
	instructions, _ := os.ReadFile(filepath.Join(ws, ".clawguard", "instructions.md"))
	a.record(map[string]any{"type": "start", "session": os.Getenv("CLAWGUARD_SESSION_ID"), "group": os.Getenv("CLAWGUARD_GROUP_ID"),
		"packages": strings.TrimSpace(string(pkgs)), "instructions": string(instructions), "pid": os.Getpid()})
	defer a.record(map[string]any{"type": "stop"})

	go a.inbox(ctx)

	marker := filepath.Join(ws, ".demo-script-done")
	if _, err := os.Stat(marker); err == nil {
		a.record(map[string]any{"type": "info", "text": "script already ran in this workspace"})
	} else {
		script, err := loadScript(ws)
		if err != nil {
			a.record(map[string]any{"type": "error", "text": err.Error()})
		}
		for i, st := range script {
			if ctx.Err() != nil {
				return nil
			}
			if st.RequestID == "" {
				st.RequestID = fmt.Sprintf("script-%d", i+1)
			}
			a.step(ctx, st)
		}
		_ = os.WriteFile(marker, []byte("done\n"), 0o644)
		a.record(map[string]any{"type": "info", "text": "script done"})
	}
	<-ctx.Done()
	return nil
}

func loadScript(ws string) ([]Step, error) {
	src := os.Getenv("CLAWGUARD_DEMO_SCRIPT")
	var data []byte
	switch {
	case strings.HasPrefix(strings.TrimSpace(src), "["), strings.HasPrefix(strings.TrimSpace(src), "{"):
		data = []byte(src)
	case src != "":
		b, err := os.ReadFile(src)
		if err != nil {
			return nil, fmt.Errorf("script: %w", err)
		}
		data = b
	default:
		b, err := os.ReadFile(filepath.Join(ws, "script.json"))
		if errors.Is(err, os.ErrNotExist) {
			return defaultScript, nil
		}
		if err != nil {
			return nil, fmt.Errorf("script: %w", err)
		}
		data = b
	}
	// A script is a list of steps, or an object of lists keyed by group id
	// ("*" for any other group), so one runner's agents can differ.
	var byGroup map[string][]Step
	if strings.HasPrefix(strings.TrimSpace(string(data)), "{") {
		if err := json.Unmarshal(data, &byGroup); err != nil {
			return nil, fmt.Errorf("script: %w", err)
		}
		if steps, ok := byGroup[os.Getenv("CLAWGUARD_GROUP_ID")]; ok {
			return steps, nil
		}
		return byGroup["*"], nil
	}
	var steps []Step
	if err := json.Unmarshal(data, &steps); err != nil {
		return nil, fmt.Errorf("script: %w", err)
	}
	return steps, nil
}

// step runs one step and records the answer.
func (a *agent) step(ctx context.Context, st Step) {
	switch {
	case st.Flood > 0:
		a.flood(ctx, st.Flood)
	case st.Garbage > 0:
		a.garbage(st.Garbage)
	case st.Greet:
		a.greet(ctx, st.RequestID)
	case st.Action != "":
		a.send(ctx, st.RequestID, st.Action, st.Payload)
	}
}

func (a *agent) send(ctx context.Context, id, action string, payload map[string]any) *agentv1.SendResponse {
	p, err := structpb.NewStruct(payload)
	if err != nil {
		a.record(map[string]any{"type": "error", "text": "payload: " + err.Error()})
		return nil
	}
	var resp *agentv1.SendResponse
	for attempt := 0; ; attempt++ { // retries keep the request id: nothing runs twice
		cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		resp, err = a.client.Send(cctx, &agentv1.SendRequest{RequestId: id, Action: action, Payload: p})
		cancel()
		if err == nil || attempt >= 5 || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
	}
	if err != nil {
		a.record(map[string]any{"type": "send", "request_id": id, "action": action, "error": err.Error()})
		return nil
	}
	ev := map[string]any{"type": "send", "request_id": id, "action": action, "status": strings.ToUpper(enumword.String(resp.GetStatus())),
		"reason": resp.GetReason(), "hold_id": resp.GetHoldId()}
	if resp.GetResult() != nil {
		b, _ := protojson.Marshal(resp.GetResult())
		ev["result"] = json.RawMessage(b)
	}
	a.record(ev)
	return resp
}

// greet lists the group's destinations (through the agent's ncl) and
// sends each target a hello.
func (a *agent) greet(ctx context.Context, id string) {
	resp := a.send(ctx, id+"-list", "cli_request", map[string]any{"method": "ListDestinations"})
	for _, d := range resp.GetResult().GetFields()["destinations"].GetListValue().GetValues() {
		f := d.GetStructValue().GetFields()
		target := f["targetGroup"].GetStringValue()
		if target == "" {
			continue
		}
		a.send(ctx, id+"-"+target, "send_message", map[string]any{"to": target,
			"text": "hello " + f["name"].GetStringValue() + ", this is " + os.Getenv("CLAWGUARD_GROUP_ID")})
	}
}

// flood sends n actions at once and records how many got each answer.
func (a *agent) flood(ctx context.Context, n int) {
	var mu sync.Mutex
	counts := map[string]int{}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			resp, err := a.client.Send(cctx, &agentv1.SendRequest{RequestId: fmt.Sprintf("flood-%d-%d", time.Now().UnixNano(), i),
				Action: "install_packages", Payload: &structpb.Struct{}})
			key := "error"
			if err == nil {
				key = strings.ToUpper(enumword.String(resp.GetStatus())) + ": " + resp.GetReason()
			}
			mu.Lock()
			counts[key]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	a.record(map[string]any{"type": "flood", "sent": n, "answers": counts})
}

// garbage writes junk to the gateway socket over n fresh connections.
func (a *agent) garbage(n int) {
	ok := 0
	for range n {
		c, err := net.Dial("unix", a.socket)
		if err != nil {
			continue
		}
		_, _ = c.Write([]byte("this is not HTTP/2 \x00\xff\xfe garbage\r\n\r\n"))
		c.Close()
		ok++
	}
	a.record(map[string]any{"type": "garbage", "connections": ok})
}

// handledItems reads the inbox item ids an earlier run of the agent in
// this workspace recorded.
func handledItems(ws string) map[string]bool {
	seen := map[string]bool{}
	b, _ := os.ReadFile(filepath.Join(ws, "events.jsonl"))
	for _, line := range strings.Split(string(b), "\n") {
		var ev struct {
			ItemID string `json:"item_id"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.ItemID != "" {
			seen[ev.ItemID] = true
		}
	}
	return seen
}

// inbox follows the inbox, reconnecting while the agent lives: each item
// is handled once (by item id), then acknowledged.
func (a *agent) inbox(ctx context.Context) {
	for ctx.Err() == nil {
		st, err := a.client.Inbox(ctx, &agentv1.InboxRequest{Acknowledges: true})
		if err == nil {
			for {
				it, rerr := st.Recv()
				if rerr != nil {
					err = rerr
					break
				}
				if id := it.GetItemId(); id == "" || !a.handled[id] {
					a.handle(ctx, it)
				}
				a.ack(ctx, it.GetItemId())
			}
		}
		if ctx.Err() != nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ack tells the runner the item is handled (recorded). A lost ack only
// means the item comes again, and is recognised.
func (a *agent) ack(ctx context.Context, id string) {
	if id == "" {
		return
	}
	a.handled[id] = true
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := a.client.Ack(cctx, &agentv1.AckRequest{ItemIds: []string{id}}); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "demo-agent: ack", id+":", err)
	}
}

func (a *agent) handle(ctx context.Context, it *agentv1.InboxResponse) {
	if n := it.GetNotice(); n != nil {
		a.record(map[string]any{"type": "notice", "kind": strings.ToUpper(enumword.String(n.GetKind())),
			"text": n.GetText(), "hold_id": n.GetHoldId(), "request_id": n.GetRequestId(), "item_id": it.GetItemId()})
		return
	}
	m := it.GetMessage()
	if m == nil {
		return
	}
	a.record(map[string]any{"type": "message", "id": m.GetId(), "from": m.GetFromAgentGroupId(), "sender": m.GetSenderUserId(), "text": m.GetText(),
		"item_id": it.GetItemId()})
	text := strings.TrimSpace(m.GetText())
	switch {
	case strings.HasPrefix(text, "/do "):
		var st Step
		if err := json.Unmarshal([]byte(strings.TrimPrefix(text, "/do ")), &st); err != nil {
			a.record(map[string]any{"type": "error", "text": "/do: " + err.Error()})
			return
		}
		if st.RequestID == "" {
			st.RequestID = "do-" + m.GetId()
		}
		go a.step(ctx, st)
	case m.GetSenderUserId() != "" && text != "":
		// A chat message: answer into the chat (the runner's reply action).
		go a.send(ctx, "chat-"+m.GetId(), "reply", map[string]any{"text": "got: " + text})
	case m.GetFromAgentGroupId() != "" && !strings.HasPrefix(text, "got: "):
		go a.send(ctx, "reply-"+m.GetId(), "send_message", map[string]any{"to": m.GetFromAgentGroupId(), "text": "got: " + text})
	}
}

// record prints an event and appends it to events.jsonl.
func (a *agent) record(ev map[string]any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seq++
	ev["seq"] = a.seq
	ev["at"] = time.Now().UTC().Format(time.RFC3339Nano)
	b, _ := json.Marshal(ev)
	fmt.Println(string(b))
	if a.events != nil {
		a.events.Write(append(b, '\n'))
	}
}
