package mcpface

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	"google.golang.org/protobuf/types/known/structpb"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
	"github.com/clawguard/clawguard/runner/internal/delivery"
	"github.com/clawguard/clawguard/runner/internal/gateway"
)

// These tests are about delivery: the runner's side is the real gateway on
// a unix socket with the real durable inbox (its log file), restarted as a
// runner restarts; the model's side is an MCP client on in-memory
// transports.

// runnerSide is one session's gateway and inbox, as a runner keeps them.
type runnerSide struct {
	t     *testing.T
	sock  string
	log   string
	inbox *gateway.Inbox
	gw    *gateway.Gateway
}

type noSubmit struct{}

func (noSubmit) Submit(context.Context, delivery.Session, string, string, *structpb.Struct) delivery.Outcome {
	return delivery.Outcome{Status: agentv1.SendStatus_SEND_STATUS_DONE}
}

func newRunnerSide(t *testing.T) *runnerSide {
	t.Helper()
	dir, err := os.MkdirTemp("", "cgack") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	r := &runnerSide{t: t, sock: filepath.Join(dir, "gw.sock"), log: filepath.Join(dir, "inbox", "s1.log")}
	r.start()
	t.Cleanup(func() { r.gw.Close(); r.inbox.Close() })
	return r
}

// start opens the inbox from its log and serves the gateway (a runner
// starting, or starting again).
func (r *runnerSide) start() {
	r.t.Helper()
	in, err := gateway.OpenInbox(r.log, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	g, err := gateway.Listen(r.sock, delivery.Session{ID: "s1", GroupID: "g1"}, noSubmit{}, in,
		gateway.Options{Known: func(string) bool { return true }})
	if err != nil {
		r.t.Fatal(err)
	}
	r.inbox, r.gw = in, g
}

// restart is a runner killed and started again: nothing is closed
// cleanly, the log is all the new one has. lost, when set, is what the log
// held earlier: a machine crash lost what was written (not synced) since.
func (r *runnerSide) restart(lost []byte) {
	r.t.Helper()
	r.gw.Close()
	if lost != nil {
		if err := os.WriteFile(r.log, lost, 0o600); err != nil {
			r.t.Fatal(err)
		}
	}
	r.start()
}

func (r *runnerSide) snapshot() []byte {
	r.t.Helper()
	b, err := os.ReadFile(r.log)
	if err != nil {
		r.t.Fatal(err)
	}
	return b
}

// push is a message the server pushed (durable: synced before the push is
// acknowledged to the server).
func (r *runnerSide) push(id, text string) {
	r.t.Helper()
	m := &agentv1.InboxResponse{Item: &agentv1.InboxResponse_Message{Message: &agentv1.InboundMessage{Id: "m-" + id, FromAgentGroupId: "ag_2", Text: text}}}
	if err := r.inbox.Durable(id, m); err != nil {
		r.t.Fatal(err)
	}
}

// countingAcker is the real Ack, recorded, failing its first fail calls
// (the ack lost on the way) without reaching the runner.
type countingAcker struct {
	gw      agentv1.AgentGatewayClient
	mu      sync.Mutex
	fail    int
	calls   [][]string
	acked   []string
	refused int
}

func (a *countingAcker) Ack(ctx context.Context, ids []string) error {
	a.mu.Lock()
	a.calls = append(a.calls, ids)
	if a.fail > 0 {
		a.fail--
		a.refused++
		a.mu.Unlock()
		return status.Error(codes.Unavailable, "connection reset (test)")
	}
	a.mu.Unlock()
	if _, err := a.gw.Ack(ctx, &agentv1.AckRequest{ItemIds: ids}, grpc.WaitForReady(true)); err != nil {
		return err
	}
	a.mu.Lock()
	a.acked = append(a.acked, ids...)
	a.mu.Unlock()
	return nil
}

func (a *countingAcker) ackedIDs() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.acked...)
}

func (a *countingAcker) maxBatch() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, c := range a.calls {
		n = max(n, len(c))
	}
	return n
}

// model is one clawguard-mcp process and the MCP host (its model) on it.
type model struct {
	cs   *mcp.ClientSession
	stop context.CancelFunc
	done chan struct{} // closed once Run returned
}

type faceOpts struct {
	queueMax int
	acker    Acker
	log      *slog.Logger
	face     **Face // set to the Face, for tests that break its disk
}

func startFace(t *testing.T, r *runnerSide, queue string, o faceOpts) *model {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+r.sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	f := New(Config{Gateway: agentv1.NewAgentGatewayClient(conn), Acker: o.acker, QueuePath: queue, QueueMax: o.queueMax,
		CallWait: time.Second, MaxWait: 10 * time.Second, Log: o.log})
	if o.face != nil {
		*o.face = f
	}
	ctx, cancel := context.WithCancel(context.Background())
	st, ct := mcp.NewInMemoryTransports()
	m := &model{stop: cancel, done: make(chan struct{})}
	go func() {
		if err := f.Run(ctx, st); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("clawguard-mcp: %v", err)
		}
		close(m.done)
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	m.cs = cs
	t.Cleanup(m.kill)
	return m
}

// kill ends the clawguard-mcp process: whatever it did not put on disk is
// gone.
func (m *model) kill() {
	m.stop()
	m.cs.Close()
	select {
	case <-m.done:
	case <-time.After(10 * time.Second):
		panic("clawguard-mcp did not stop")
	}
}

// read is the model calling read_inbox: the texts it is shown.
func (m *model) read(t *testing.T) []string {
	t.Helper()
	res, err := m.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ReadInbox})
	if err != nil || res.IsError {
		t.Fatalf("read_inbox: %v %v", text(res), err)
	}
	return shown(t, res)
}

func (m *model) wait(t *testing.T, seconds float64) []string {
	t.Helper()
	res, err := m.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: WaitForMessages, Arguments: map[string]any{"timeout_seconds": seconds}})
	if err != nil || res.IsError {
		t.Fatalf("wait_for_messages: %v %v", text(res), err)
	}
	return shown(t, res)
}

func shown(t *testing.T, res *mcp.CallToolResult) []string {
	t.Helper()
	var out []string
	for _, it := range structured(t, res)["items"].([]any) {
		out = append(out, it.(map[string]any)["text"].(string))
	}
	return out
}

// Items are acknowledged once they are in clawguard-mcp's queue on disk,
// not when the model reads them: the runner forgets them (its ack deadline
// sees nothing held up) while the model has read nothing, and a
// clawguard-mcp killed before the model read them shows them, once, after
// it starts again.
func TestItemsAreAcknowledgedOnceQueuedAndShownOnceAfterARestart(t *testing.T) {
	r := newRunnerSide(t)
	queue := filepath.Join(t.TempDir(), "workspace", ".clawguard-mcp", "inbox.jsonl")
	ack := &countingAcker{gw: agentv1.NewAgentGatewayClient(dialUnix(t, r.sock))}
	m1 := startFace(t, r, queue, faceOpts{acker: ack})
	for i := range 3 {
		r.push(fmt.Sprintf("p%d", i+1), fmt.Sprintf("hello %d", i+1))
	}
	waitFor(t, "the three items acknowledged through Ack", func() bool {
		return slices.Equal(sorted(ack.ackedIDs()), []string{"p1", "p2", "p3"})
	})
	if n := r.inbox.Len(); n != 0 {
		t.Fatalf("the runner still holds %d items after the acks", n)
	}
	// What the ack deadline looks at: nothing held up by the agent.
	if n, _ := r.inbox.Stalled(); n != 0 {
		t.Fatalf("the runner counts %d items held up by an agent whose model has not read yet", n)
	}
	if b := ack.maxBatch(); b > maxAckBatch {
		t.Fatalf("an Ack carried %d ids (at most %d)", b, maxAckBatch)
	}

	m1.kill() // before the model read anything
	m2 := startFace(t, r, queue, faceOpts{})
	if got, want := m2.read(t), []string{"hello 1", "hello 2", "hello 3"}; !slices.Equal(got, want) {
		t.Fatalf("after the restart the model was shown %q, want %q", got, want)
	}
	if got := m2.read(t); len(got) != 0 {
		t.Fatalf("shown again: %q", got)
	}
	m2.kill()
	m3 := startFace(t, r, queue, faceOpts{})
	if got := m3.read(t); len(got) != 0 {
		t.Fatalf("read items shown again after another restart: %q", got)
	}
}

// The runner sends an item again that clawguard-mcp has acknowledged — its
// record of the ack was not on disk when the machine crashed — before and
// after the model read it, clawguard-mcp restarted in between: the model
// is shown it once.
func TestAnAcknowledgedItemTheRunnerSendsAgainIsShownOnce(t *testing.T) {
	r := newRunnerSide(t)
	queue := filepath.Join(t.TempDir(), "inbox.jsonl")
	ack := &countingAcker{gw: agentv1.NewAgentGatewayClient(dialUnix(t, r.sock))}
	m1 := startFace(t, r, queue, faceOpts{acker: ack})
	r.push("p1", "hello")
	before := r.snapshot() // the push is synced; its ack will not be
	waitFor(t, "p1 acknowledged", func() bool { return slices.Contains(ack.ackedIDs(), "p1") && r.inbox.Len() == 0 })

	// Unread: the machine crashes, the runner comes back holding p1.
	m1.kill()
	r.restart(before)
	ack2 := &countingAcker{gw: agentv1.NewAgentGatewayClient(dialUnix(t, r.sock))}
	m2 := startFace(t, r, queue, faceOpts{acker: ack2})
	waitFor(t, "the re-sent p1 acknowledged again", func() bool { return slices.Contains(ack2.ackedIDs(), "p1") && r.inbox.Len() == 0 })
	if got := m2.read(t); !slices.Equal(got, []string{"hello"}) {
		t.Fatalf("the model was shown %q, want [hello] once", got)
	}

	// Read: the same again.
	m2.kill()
	r.restart(before)
	ack3 := &countingAcker{gw: agentv1.NewAgentGatewayClient(dialUnix(t, r.sock))}
	m3 := startFace(t, r, queue, faceOpts{acker: ack3})
	waitFor(t, "the re-sent p1 acknowledged again", func() bool { return slices.Contains(ack3.ackedIDs(), "p1") && r.inbox.Len() == 0 })
	if got := m3.read(t); len(got) != 0 {
		t.Fatalf("an item the model read was shown again: %q", got)
	}
}

// Acks that do not arrive (the connection breaks under them) are retried,
// and the runner, restarted meanwhile, sends the unacknowledged items
// again: the model is shown each once, and the runner ends up holding
// nothing.
func TestAnItemWhoseAckWasLostIsShownOnce(t *testing.T) {
	r := newRunnerSide(t)
	queue := filepath.Join(t.TempDir(), "inbox.jsonl")
	ack := &countingAcker{gw: agentv1.NewAgentGatewayClient(dialUnix(t, r.sock)), fail: 3}
	m := startFace(t, r, queue, faceOpts{acker: ack})
	r.push("p1", "one")
	r.push("p2", "two")
	waitFor(t, "a failed ack", func() bool {
		ack.mu.Lock()
		defer ack.mu.Unlock()
		return ack.refused > 0
	})
	r.restart(nil) // the runner still holds p1 and p2, and sends them again
	waitFor(t, "the acks retried until taken", func() bool { return r.inbox.Len() == 0 })
	got := m.read(t)
	if !slices.Equal(got, []string{"one", "two"}) {
		t.Fatalf("the model was shown %q, want [one two] once each", got)
	}
	if got := m.read(t); len(got) != 0 {
		t.Fatalf("shown again: %q", got)
	}
}

// A full queue takes no more: clawguard-mcp stops acknowledging, so the
// runner keeps the rest (across a clawguard-mcp restart too), and once the
// model reads they come, each once: nothing is dropped.
func TestAFullQueueStopsAcknowledgingAndLosesNothing(t *testing.T) {
	r := newRunnerSide(t)
	queue := filepath.Join(t.TempDir(), "inbox.jsonl")
	ack := &countingAcker{gw: agentv1.NewAgentGatewayClient(dialUnix(t, r.sock))}
	m1 := startFace(t, r, queue, faceOpts{acker: ack, queueMax: 3})
	for i := range 5 {
		r.push(fmt.Sprintf("p%d", i+1), fmt.Sprintf("m%d", i+1))
	}
	waitFor(t, "the first three acknowledged", func() bool { return len(ack.ackedIDs()) >= 3 })
	m1.kill()
	if got := sorted(ack.ackedIDs()); !slices.Equal(got, []string{"p1", "p2", "p3"}) {
		t.Fatalf("acknowledged %v with room for three", got)
	}
	if n := r.inbox.Len(); n != 2 {
		t.Fatalf("the runner holds %d items, want the 2 the full queue did not take", n)
	}

	m2 := startFace(t, r, queue, faceOpts{queueMax: 3})
	if got := m2.read(t); !slices.Equal(got, []string{"m1", "m2", "m3"}) {
		t.Fatalf("first read: %q", got)
	}
	var rest []string
	waitFor(t, "the two the runner kept", func() bool {
		rest = append(rest, m2.wait(t, 5)...)
		return len(rest) >= 2
	})
	if !slices.Equal(rest, []string{"m4", "m5"}) {
		t.Fatalf("then: %q, want [m4 m5]", rest)
	}
	waitFor(t, "the runner holding nothing", func() bool { return r.inbox.Len() == 0 })
	if got := m2.read(t); len(got) != 0 {
		t.Fatalf("shown again: %q", got)
	}
}

// An item that cannot be written to the queue (its disk fails) is not
// acknowledged: the runner keeps it and sends it again until it can be;
// then it is acknowledged and shown, once.
func TestAnItemThatCannotBeQueuedIsNotAcknowledged(t *testing.T) {
	r := newRunnerSide(t)
	dir := filepath.Join(t.TempDir(), "ws", ".clawguard-mcp")
	ack := &countingAcker{gw: agentv1.NewAgentGatewayClient(dialUnix(t, r.sock))}
	failures := &countHandler{match: "inbox item not queued"}
	var f *Face
	m := startFace(t, r, filepath.Join(dir, "inbox.jsonl"), faceOpts{acker: ack, log: slog.New(failures), face: &f})
	// The disk goes: the open log fails its next write, and so does every
	// attempt to write it anew.
	f.inbox.mu.Lock()
	f.inbox.q.f.Close()
	err := os.Rename(dir, dir+".away")
	f.inbox.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	r.push("p1", "hello")
	waitFor(t, "the item refused by the queue twice (sent again in between)", func() bool { return failures.count() >= 2 })
	if got := ack.ackedIDs(); len(got) != 0 || r.inbox.Len() != 1 {
		t.Fatalf("acknowledged %v (the runner holds %d) with nothing on disk", got, r.inbox.Len())
	}
	if err := os.Rename(dir+".away", dir); err != nil { // the disk is back
		t.Fatal(err)
	}
	waitFor(t, "p1 acknowledged once queued", func() bool { return r.inbox.Len() == 0 })
	if got := m.read(t); !slices.Equal(got, []string{"hello"}) {
		t.Fatalf("the model was shown %q, want [hello] once", got)
	}
}

// countHandler counts log records whose message contains match.
type countHandler struct {
	match string
	mu    sync.Mutex
	n     int
}

func (h *countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.match) {
		h.mu.Lock()
		h.n++
		h.mu.Unlock()
	}
	return nil
}
func (h *countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countHandler) WithGroup(string) slog.Handler      { return h }
func (h *countHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// A second clawguard-mcp of the session (another MCP host started it)
// serves tools but leaves the inbox to the first, says so, and takes the
// queue over once the first exits.
func TestASecondClawguardMCPLeavesTheInboxToTheFirst(t *testing.T) {
	r := newRunnerSide(t)
	queue := filepath.Join(t.TempDir(), "inbox.jsonl")
	first := startFace(t, r, queue, faceOpts{})
	second := startFace(t, r, queue, faceOpts{})
	if got := second.read(t); len(got) != 1 || !strings.Contains(got[0], "Another clawguard-mcp of this session reads the inbox") {
		t.Fatalf("the second was shown %q", got)
	}
	r.push("p1", "for the first")
	if got := first.wait(t, 5); !slices.Equal(got, []string{"for the first"}) {
		t.Fatalf("the first was shown %q", got)
	}
	first.kill()
	r.push("p2", "for the second")
	var got []string
	waitFor(t, "the second taking the inbox over", func() bool {
		got = append(got, second.wait(t, 1)...)
		return len(got) > 0
	})
	if !slices.Equal(got, []string{"for the second"}) {
		t.Fatalf("the second was shown %q", got)
	}
}

func dialUnix(t *testing.T, sock string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}
