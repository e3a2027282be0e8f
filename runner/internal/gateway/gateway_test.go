package gateway

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
	"github.com/clawguard/clawguard/runner/internal/delivery"
)

type countingSubmitter struct {
	n     atomic.Int32
	block chan struct{} // nil: answer at once
}

func (c *countingSubmitter) Submit(ctx context.Context, s delivery.Session, id, action string, p *structpb.Struct) delivery.Outcome {
	c.n.Add(1)
	if c.block != nil {
		select {
		case <-c.block:
		case <-ctx.Done():
		}
	}
	return delivery.Done(nil, "ran "+action)
}

func start(t *testing.T, sub Submitter, o Options) (*Gateway, agentv1.AgentGatewayClient) {
	t.Helper()
	dir, err := os.MkdirTemp("", "cg-gwt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if o.Known == nil {
		o.Known = func(a string) bool { return a == "install_packages" }
	}
	g, err := Listen(filepath.Join(dir, "s1.sock"), delivery.Session{ID: "s1", GroupID: "g1"}, sub, NewInbox(0), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	fi, err := os.Stat(g.Path())
	if err != nil || fi.Mode().Perm() != 0o666 || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket mode: %v %v", fi.Mode(), err)
	}
	return g, dial(t, g.Path())
}

func dial(t *testing.T, path string) agentv1.AgentGatewayClient {
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return agentv1.NewAgentGatewayClient(conn)
}

func payload(t *testing.T, m map[string]any) *structpb.Struct {
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSendValidatesAtTheEdge(t *testing.T) {
	sub := &countingSubmitter{}
	g, c := start(t, sub, Options{})
	ctx := context.Background()
	big := strings.Repeat("x", MaxPayload+1)
	for name, req := range map[string]*agentv1.SendRequest{
		"no request id":  {Action: "install_packages"},
		"no action":      {RequestId: "1"},
		"unknown action": {RequestId: "2", Action: "rm_rf"},
		"huge payload":   {RequestId: "3", Action: "install_packages", Payload: payload(t, map[string]any{"x": big})},
		"long id":        {RequestId: strings.Repeat("i", 200), Action: "install_packages"},
	} {
		resp, err := c.Send(ctx, req)
		if err != nil || resp.GetStatus() != agentv1.SendStatus_SEND_STATUS_FAILED || resp.GetReason() == "" {
			t.Errorf("%s: resp=%v err=%v", name, resp, err)
		}
	}
	if sub.n.Load() != 0 {
		t.Fatalf("invalid sends reached the submitter: %d", sub.n.Load())
	}
	if g.inbox.Len() != 5 {
		t.Fatalf("want a FAILED notice per invalid send, inbox has %d", g.inbox.Len())
	}
	// A valid send still works, and a retry with the same id runs nothing twice.
	for range 2 {
		resp, err := c.Send(ctx, &agentv1.SendRequest{RequestId: "ok", Action: "install_packages"})
		if err != nil || resp.GetStatus() != agentv1.SendStatus_SEND_STATUS_DONE {
			t.Fatalf("valid send: %v %v", resp, err)
		}
	}
	if sub.n.Load() != 1 {
		t.Fatalf("retry ran again: %d runs", sub.n.Load())
	}
	resp, _ := c.Send(ctx, &agentv1.SendRequest{RequestId: "ok", Action: "install_packages", Payload: payload(t, map[string]any{"a": "b"})})
	if resp.GetStatus() != agentv1.SendStatus_SEND_STATUS_FAILED || !strings.Contains(resp.GetReason(), "different action") {
		t.Fatalf("reused id: %v", resp)
	}
}

func TestGarbageOnTheSocketIsNotFatal(t *testing.T) {
	sub := &countingSubmitter{}
	g, c := start(t, sub, Options{})
	for range 20 {
		conn, err := net.Dial("unix", g.Path())
		if err != nil {
			t.Fatal(err)
		}
		conn.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\xff\xff\xff\xff garbage \x00\x01"))
		conn.Close()
	}
	resp, err := c.Send(context.Background(), &agentv1.SendRequest{RequestId: "after", Action: "install_packages"})
	if err != nil || resp.GetStatus() != agentv1.SendStatus_SEND_STATUS_DONE {
		t.Fatalf("gateway broken by garbage: %v %v", resp, err)
	}
}

func TestFloodIsRateLimitedAndBounded(t *testing.T) {
	sub := &countingSubmitter{block: make(chan struct{})}
	var refusedMu sync.Mutex
	refused := map[string]int{}
	g, c := start(t, sub, Options{Limits: Limits{Rate: 5, Burst: 10, InFlight: 3}, OnRefused: func(limit string) {
		refusedMu.Lock()
		refused[limit]++
		refusedMu.Unlock()
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var mu sync.Mutex
	reasons := map[string]int{}
	limits := map[string]int{}
	var answered atomic.Int32
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := c.Send(ctx, &agentv1.SendRequest{RequestId: fmt.Sprintf("f%d", i), Action: "install_packages"})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				reasons["error: "+err.Error()]++
				return
			}
			reasons[resp.GetReason()]++
			if resp.GetLimit() == LimitRate && resp.GetRetryAfter().AsDuration() <= 0 {
				reasons["a rate refusal without when to retry"]++
			}
			limits[resp.GetLimit()]++
			answered.Add(1)
		}()
	}
	// Every send but the 3 running ones is answered at once, while those 3 still hold their slots.
	for answered.Load() < 197 {
		if ctx.Err() != nil {
			t.Fatalf("flood not answered: %d answers", answered.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := sub.n.Load(); n != 3 {
		t.Fatalf("%d actions running, bound is 3", n)
	}
	close(sub.block)
	wg.Wait()
	if limits[LimitRate] < 150 || reasons["ran install_packages"] != 3 || reasons["a rate refusal without when to retry"] != 0 {
		t.Fatalf("flood not rate limited: %v", reasons)
	}
	if limits[LimitInFlight] == 0 {
		t.Fatalf("in-flight bound not enforced: %v", reasons)
	}
	// A refusal says which limit, its figures and flag, and when to retry;
	// each is counted by limit.
	for reason := range reasons {
		if strings.Contains(reason, "rate limited") && (!strings.Contains(reason, "5 actions a second, 10 at once") ||
			!strings.Contains(reason, "--gateway-rate") || !strings.Contains(reason, "retry in ")) {
			t.Fatalf("rate refusal %q does not say which limit and when to retry", reason)
		}
		if strings.Contains(reason, "in flight") && (!strings.Contains(reason, "this session has 3") || !strings.Contains(reason, "--gateway-in-flight")) {
			t.Fatalf("in-flight refusal %q does not say which limit", reason)
		}
	}
	refusedMu.Lock()
	if refused[LimitRate] != limits[LimitRate] || refused[LimitInFlight] != limits[LimitInFlight] {
		t.Fatalf("refusals counted %v, answered %v", refused, limits)
	}
	refusedMu.Unlock()
	// The rate-limit notice was queued, and the gateway answers again once the bucket refills.
	found := false
	for _, it := range g.inbox.items {
		if strings.Contains(it.item.GetNotice().GetText(), "rate limit") {
			found = true
		}
	}
	if !found {
		t.Fatal("no rate-limit notice in the inbox")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := c.Send(ctx, &agentv1.SendRequest{RequestId: "later", Action: "install_packages"})
		if err == nil && resp.GetStatus() == agentv1.SendStatus_SEND_STATUS_DONE {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway never recovered: %v %v", resp, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestInboxSurvivesAgentReconnects(t *testing.T) {
	g, c := start(t, &countingSubmitter{}, Options{})
	g.inbox.Notice(&agentv1.Notice{Kind: agentv1.NoticeKind_NOTICE_KIND_HELD, HoldId: "h1"})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s1ctx, s1cancel := context.WithCancel(ctx)
	s1, err := c.Inbox(s1ctx, &agentv1.InboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := s1.Recv()
	if err != nil || first.GetNotice().GetHoldId() != "h1" {
		t.Fatalf("first item: %v %v", first, err)
	}
	s1cancel() // the agent goes away (e.g. its container restarts)
	for deadline := time.Now().Add(5 * time.Second); g.inbox.Attached(); {
		if time.Now().After(deadline) {
			t.Fatal("inbox stream never detached")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Items that arrive while no agent is connected wait for the next one.
	g.inbox.Message(&agentv1.InboundMessage{Id: "m1", Text: "hello"})
	g.inbox.Notice(&agentv1.Notice{Kind: agentv1.NoticeKind_NOTICE_KIND_RESULT, Text: "while away"})
	c2 := dial(t, g.Path())
	s2, err := c2.Inbox(ctx, &agentv1.InboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 2 {
		it, err := s2.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if m := it.GetMessage(); m != nil {
			got = append(got, m.GetText())
		} else {
			got = append(got, it.GetNotice().GetText())
		}
	}
	if got[0] != "hello" || got[1] != "while away" {
		t.Fatalf("after reconnect got %v", got)
	}
}

func TestListActionsServesTheRegistrysSpecs(t *testing.T) {
	reg := delivery.NewRegistry(nil)
	reg.MustRegister(delivery.Action{Name: "install_packages", CatalogAction: "self_mod.install_packages", ApprovalKind: "install_packages",
		Description: "install", Schema: delivery.InstallPackagesSchema(), Run: func(context.Context, delivery.Call) delivery.Outcome { return delivery.Outcome{} }})
	_, c := start(t, &countingSubmitter{}, Options{Actions: reg.Specs})
	resp, err := c.ListActions(context.Background(), &agentv1.ListActionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	a := resp.GetActions()
	if len(a) != 1 || a[0].GetName() != "install_packages" || a[0].GetCatalogAction() != "self_mod.install_packages" ||
		a[0].GetInputSchemaJson() != reg.Specs()[0].GetInputSchemaJson() || !strings.Contains(a[0].GetInputSchemaJson(), `"apt"`) {
		t.Fatalf("ListActions = %v", a)
	}
}

func TestSendAnswersWhoMayApprove(t *testing.T) {
	sub := submitterFunc(func() delivery.Outcome {
		o := delivery.Held("hold_1", "needs approval")
		o.Approvers = "telegram:dana"
		return o
	})
	_, c := start(t, sub, Options{})
	resp, err := c.Send(context.Background(), &agentv1.SendRequest{RequestId: "r1", Action: "install_packages"})
	if err != nil || resp.GetStatus() != agentv1.SendStatus_SEND_STATUS_HELD || resp.GetHoldId() != "hold_1" || resp.GetApprovers() != "telegram:dana" {
		t.Fatalf("Send = %v, %v", resp, err)
	}
}

type submitterFunc func() delivery.Outcome

func (f submitterFunc) Submit(context.Context, delivery.Session, string, string, *structpb.Struct) delivery.Outcome {
	return f()
}

// Issue 42: the gateway refused a tool-heavy agent's allowed, read-only
// calls (20 a second, 40 at once, 8 in flight, no flag). At the defaults,
// 300 calls, 16 at a time, as fast as they are answered, are all run.
func TestTheDefaultLimitsLetAToolHeavyAgentRun(t *testing.T) {
	_, c := start(t, &countingSubmitter{}, Options{})
	var wg sync.WaitGroup
	var failed atomic.Int32
	next := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				resp, err := c.Send(context.Background(), &agentv1.SendRequest{RequestId: fmt.Sprintf("read-%d", i), Action: "install_packages"})
				if err != nil || resp.GetStatus() != agentv1.SendStatus_SEND_STATUS_DONE {
					failed.Add(1)
				}
			}
		}()
	}
	for i := range 300 {
		next <- i
	}
	close(next)
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d of 300 calls refused at the default limits", n)
	}
}
