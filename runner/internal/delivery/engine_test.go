package delivery

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// fakeDecider is the server to the engine: the guard (Decide) and the
// apply step (ApplyAction). A replay (ApplyAction with a grant) is decided
// as resp or err says, as a fresh decision is.
type fakeDecider struct {
	mu      sync.Mutex
	reqs    []*guardv1.DecideRequest
	applies []*guardv1.ApplyActionRequest
	resp    *guardv1.DecideResponse
	err     error
	wait    bool // block until ctx ends
}

func (f *fakeDecider) ApplyAction(ctx context.Context, req *guardv1.ApplyActionRequest, _ ...grpc.CallOption) (*guardv1.ApplyActionResponse, error) {
	f.mu.Lock()
	f.applies = append(f.applies, req)
	f.mu.Unlock()
	if req.GetGrant() == "" {
		return &guardv1.ApplyActionResponse{Message: "applied"}, nil
	}
	if f.wait {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if f.err != nil {
		return nil, f.err
	}
	return &guardv1.ApplyActionResponse{Decision: f.resp.GetDecision(), DecisionId: f.resp.GetDecisionId(), Message: "applied"}, nil
}

func (f *fakeDecider) Decide(ctx context.Context, req *guardv1.DecideRequest) (*guardv1.DecideResponse, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	if f.wait {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return f.resp, f.err
}

type notices struct {
	mu   sync.Mutex
	ns   []*agentv1.Notice
	keys map[string]bool
}

func (n *notices) Notify(_ string, x *agentv1.Notice) {
	n.mu.Lock()
	n.ns = append(n.ns, x)
	n.mu.Unlock()
}

// NotifyOnce keeps the keys it saw, as the session's inbox does.
func (n *notices) NotifyOnce(_, key string, x *agentv1.Notice) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.keys == nil {
		n.keys = map[string]bool{}
	}
	if !n.keys[key] {
		n.keys[key] = true
		n.ns = append(n.ns, x)
	}
}
func (n *notices) kinds() []agentv1.NoticeKind {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []agentv1.NoticeKind
	for _, x := range n.ns {
		out = append(out, x.GetKind())
	}
	return out
}

func decision(effect guardv1.Effect, reason string) *guardv1.DecideResponse {
	return &guardv1.DecideResponse{Decision: &guardv1.Decision{Effect: effect, Reason: reason}, DecisionId: "dec_1"}
}

func newEngine(d Decider, ran *[]Call) (*Engine, *notices) {
	r := NewRegistry(nil)
	r.MustRegister(Action{
		Name: "install_packages", CatalogAction: "self_mod.install_packages", ApprovalKind: "install_packages",
		Schema: InstallPackagesSchema(),
		Card:   func(Session, *structpb.Struct) (string, string) { return "Install packages", "ok?" },
		Run: func(_ context.Context, c Call) Outcome {
			*ran = append(*ran, c)
			return Done(nil, "installed")
		},
	})
	n := &notices{}
	e := &Engine{Registry: r, Decider: d, Notifier: n, DecideWait: 200 * time.Millisecond}
	if a, ok := d.(Applier); ok {
		e.Applier = a
	}
	return e, n
}

var sess = Session{ID: "s1", GroupID: "g1"}

func pkgs(t *testing.T) *structpb.Struct {
	return mustStruct(t, map[string]any{"apt": []any{"cowsay"}})
}

func TestEngineHoldCreatesCardAndNotifiesHeld(t *testing.T) {
	d := &fakeDecider{resp: &guardv1.DecideResponse{Decision: &guardv1.Decision{Effect: guardv1.Effect_EFFECT_HOLD, Reason: "needs admin"}, HoldId: "hold_9"}}
	var ran []Call
	e, n := newEngine(d, &ran)
	out := e.Submit(context.Background(), sess, "r1", "install_packages", pkgs(t))
	if out.Status != agentv1.SendStatus_SEND_STATUS_HELD || out.HoldID != "hold_9" || len(ran) != 0 {
		t.Fatalf("out = %+v ran = %d", out, len(ran))
	}
	req := d.reqs[0]
	if req.GetAction() != "self_mod.install_packages" || req.GetActor().GetAgent().GetAgentGroupId() != "g1" ||
		req.GetActor().GetAgent().GetSessionId() != "s1" || req.GetRequestId() == "" {
		t.Fatalf("decide request = %v", req)
	}
	c := req.GetCard()
	// The payload travels once: the card's is left out (the hold keeps the decided one).
	if c.GetKind() != "install_packages" || c.GetDeliveryAction() != "install_packages" || c.GetTitle() != "Install packages" ||
		c.GetPayload() != nil || req.GetPayload().GetFields()["apt"] == nil || c.GetDedupKey() == "" {
		t.Fatalf("card = %v", c)
	}
	if k := n.kinds(); len(k) != 1 || k[0] != agentv1.NoticeKind_NOTICE_KIND_HELD || n.ns[0].GetHoldId() != "hold_9" {
		t.Fatalf("notices = %v", n.ns)
	}
}

func TestEngineHeldSaysWhoMayApprove(t *testing.T) {
	d := &fakeDecider{resp: &guardv1.DecideResponse{HoldId: "hold_9", Decision: &guardv1.Decision{
		Effect: guardv1.Effect_EFFECT_HOLD, Reason: "needs admin",
		ApproverRule: &guardv1.ApproverRule{Kind: &guardv1.ApproverRule_Exclusive{Exclusive: &guardv1.ExclusiveApprover{UserId: "telegram:dana"}}}}}}
	var ran []Call
	e, n := newEngine(d, &ran)
	out := e.Submit(context.Background(), sess, "r1", "install_packages", pkgs(t))
	if out.Approvers != "telegram:dana" || !strings.Contains(n.ns[0].GetText(), "approval by telegram:dana (hold hold_9)") {
		t.Fatalf("out = %+v, notice = %q", out, n.ns[0].GetText())
	}
	// The server's words, with names, win over the rule's ids.
	d.resp.Approvers = "Dana (telegram:dana)"
	if out := e.Submit(context.Background(), sess, "r2", "install_packages", pkgs(t)); out.Approvers != "Dana (telegram:dana)" {
		t.Fatalf("out = %+v, want the server's approvers", out)
	}
	for _, c := range []struct {
		rule *guardv1.ApproverRule
		want string
	}{
		{&guardv1.ApproverRule{Kind: &guardv1.ApproverRule_Exclusive{Exclusive: &guardv1.ExclusiveApprover{UserId: "u1", AlsoUserIds: []string{"u2"}}}}, "u1 or u2"},
		{&guardv1.ApproverRule{Kind: &guardv1.ApproverRule_AdminsOfScope{AdminsOfScope: &guardv1.AdminsOfScope{AgentGroupId: "ag_1", DeliveredTo: "telegram:dana"}}}, "an admin of ag_1 (asked: telegram:dana)"},
		{&guardv1.ApproverRule{Kind: &guardv1.ApproverRule_AdminsOfScope{AdminsOfScope: &guardv1.AdminsOfScope{}}}, "an owner or global admin"},
		{nil, ""},
	} {
		if got := Approvers(c.rule); got != c.want {
			t.Errorf("Approvers(%v) = %q, want %q", c.rule, got, c.want)
		}
	}
}

func TestEngineResultNoticeCarriesTheResult(t *testing.T) {
	d := &fakeDecider{resp: decision(guardv1.Effect_EFFECT_ALLOW, "ok")}
	r := NewRegistry(nil)
	res := mustStruct(t, map[string]any{"content": []any{map[string]any{"type": "text", "text": "42"}}})
	r.MustRegister(Action{Name: "act", CatalogAction: "a.b", ApprovalKind: "a",
		Run: func(context.Context, Call) Outcome { return Done(res, "ran") }})
	n := &notices{}
	e := &Engine{Registry: r, Decider: d, Applier: d, Notifier: n, DecideWait: 200 * time.Millisecond}
	e.Replay(context.Background(), sess, &guardv1.ReplayAction{HoldId: "hold_1", DeliveryAction: "act", CatalogAction: "a.b"})
	last := n.ns[len(n.ns)-1]
	if last.GetKind() != agentv1.NoticeKind_NOTICE_KIND_RESULT || last.GetHoldId() != "hold_1" || !proto.Equal(last.GetResult(), res) {
		t.Fatalf("notices = %v", n.ns)
	}
}

func TestEngineReplayOfAMalformedPayloadIsNotDecided(t *testing.T) {
	d := &fakeDecider{resp: decision(guardv1.Effect_EFFECT_ALLOW, "ok")}
	var ran []Call
	e, _ := newEngine(d, &ran)
	out := e.Replay(context.Background(), sess, &guardv1.ReplayAction{HoldId: "hold_1", DeliveryAction: "install_packages",
		CatalogAction: "self_mod.install_packages", Payload: mustStruct(t, map[string]any{"apt": []any{"x; rm -rf /"}})})
	if out.Status != agentv1.SendStatus_SEND_STATUS_FAILED || len(d.reqs) != 0 || len(d.applies) != 0 || len(ran) != 0 {
		t.Fatalf("out = %+v, decisions = %d, applies = %d, ran = %d", out, len(d.reqs), len(d.applies), len(ran))
	}
}

func TestEngineSchemaRefusalAnswersBeforeAnyDecision(t *testing.T) {
	d := &fakeDecider{}
	var ran []Call
	e, n := newEngine(d, &ran)
	out := e.Submit(context.Background(), sess, "r1", "install_packages", mustStruct(t, map[string]any{"apt": []any{"BAD NAME"}}))
	if out.Status != agentv1.SendStatus_SEND_STATUS_FAILED || len(d.reqs) != 0 || len(ran) != 0 {
		t.Fatalf("out = %+v, decisions = %d", out, len(d.reqs))
	}
	if k := n.kinds(); len(k) != 1 || k[0] != agentv1.NoticeKind_NOTICE_KIND_FAILED {
		t.Fatalf("notices = %v", n.ns)
	}
}

func TestEngineDenyAndAllow(t *testing.T) {
	d := &fakeDecider{resp: decision(guardv1.Effect_EFFECT_DENY, "nope")}
	var ran []Call
	e, n := newEngine(d, &ran)
	if out := e.Submit(context.Background(), sess, "r1", "install_packages", pkgs(t)); out.Status != agentv1.SendStatus_SEND_STATUS_DENIED || out.Reason != "nope" || len(ran) != 0 {
		t.Fatalf("deny: %+v", out)
	}
	d.resp = decision(guardv1.Effect_EFFECT_ALLOW, "ok")
	if out := e.Submit(context.Background(), sess, "r2", "install_packages", pkgs(t)); out.Status != agentv1.SendStatus_SEND_STATUS_DONE || len(ran) != 1 || ran[0].DecisionID != "dec_1" {
		t.Fatalf("allow: %+v ran=%v", out, ran)
	}
	if k := n.kinds(); len(k) != 2 || k[0] != agentv1.NoticeKind_NOTICE_KIND_DENIED || k[1] != agentv1.NoticeKind_NOTICE_KIND_RESULT {
		t.Fatalf("notices = %v", k)
	}
}

func TestEngineFailsClosedWhenTheGuardIsUnreachable(t *testing.T) {
	for name, d := range map[string]*fakeDecider{
		"waits then fails": {wait: true},
		"error":            {err: errors.New("unavailable")},
		"empty answer":     {resp: &guardv1.DecideResponse{}},
	} {
		t.Run(name, func(t *testing.T) {
			var ran []Call
			e, n := newEngine(d, &ran)
			out := e.Submit(context.Background(), sess, "r1", "install_packages", pkgs(t))
			if out.Status != agentv1.SendStatus_SEND_STATUS_FAILED || len(ran) != 0 {
				t.Fatalf("out = %+v ran = %d", out, len(ran))
			}
			if k := n.kinds(); len(k) != 1 || k[0] != agentv1.NoticeKind_NOTICE_KIND_FAILED {
				t.Fatalf("notices = %v", k)
			}
		})
	}
}

func TestEngineReplayCarriesTheGrant(t *testing.T) {
	d := &fakeDecider{resp: decision(guardv1.Effect_EFFECT_ALLOW, "grant")}
	var ran []Call
	e, n := newEngine(d, &ran)
	out := e.Replay(context.Background(), sess, &guardv1.ReplayAction{HoldId: "hold_9", DeliveryAction: "install_packages", Payload: pkgs(t)})
	if out.Status != agentv1.SendStatus_SEND_STATUS_DONE || len(ran) != 1 || !ran[0].Replay {
		t.Fatalf("out = %+v", out)
	}
	// One call: the hold named, the payload not sent (the server holds it).
	if len(d.reqs) != 0 || len(d.applies) != 1 {
		t.Fatalf("a replay asked the guard %d times and applied %d, want one apply", len(d.reqs), len(d.applies))
	}
	if req := d.applies[0]; req.GetGrant() != "hold_9" || req.GetDecisionId() != "" || len(req.GetPayload().GetFields()) != 0 ||
		req.GetAction() != "self_mod.install_packages" || req.GetSessionId() != "s1" {
		t.Fatalf("replay request = %v", req)
	}
	if ran[0].DecisionID != "dec_1" || ran[0].Applied.GetMessage() != "applied" {
		t.Fatalf("the run of the replay: %+v, want the server's decision and answer", ran[0])
	}
	if k := n.kinds(); len(k) != 2 || k[0] != agentv1.NoticeKind_NOTICE_KIND_APPROVED || k[1] != agentv1.NoticeKind_NOTICE_KIND_RESULT {
		t.Fatalf("notices = %v", k)
	}

	// Revoked between hold and approve: the live re-check denies; nothing runs (D3).
	d.resp = decision(guardv1.Effect_EFFECT_DENY, "no destination")
	ran = nil
	out = e.Replay(context.Background(), sess, &guardv1.ReplayAction{HoldId: "hold_10", DeliveryAction: "install_packages", Payload: pkgs(t)})
	if out.Status != agentv1.SendStatus_SEND_STATUS_DENIED || len(ran) != 0 || out.HoldID != "hold_10" {
		t.Fatalf("revoked replay: %+v ran=%d", out, len(ran))
	}
	// A replay never makes a second card: HOLD is a failure.
	d.resp = decision(guardv1.Effect_EFFECT_HOLD, "again")
	if out := e.Replay(context.Background(), sess, &guardv1.ReplayAction{HoldId: "h", DeliveryAction: "install_packages", Payload: pkgs(t)}); out.Status != agentv1.SendStatus_SEND_STATUS_FAILED || len(ran) != 0 {
		t.Fatalf("held replay: %+v", out)
	}
	// A replay for an action this runner doesn't have fails.
	if out := e.Replay(context.Background(), sess, &guardv1.ReplayAction{HoldId: "h", DeliveryAction: "nope"}); out.Status != agentv1.SendStatus_SEND_STATUS_FAILED {
		t.Fatalf("unknown replay: %+v", out)
	}
}

func TestDecisionRequestIDIsStablePerSend(t *testing.T) {
	a := DecisionRequestID(sess, "r1", "install_packages", pkgs(t))
	if b := DecisionRequestID(sess, "r1", "install_packages", pkgs(t)); a != b {
		t.Fatal("same send, different ids")
	}
	if b := DecisionRequestID(sess, "r1", "install_packages", mustStruct(t, map[string]any{"apt": []any{"vim"}})); a == b {
		t.Fatal("reused request id with other payload maps to the same decision")
	}
}

// A replay whose apply could not reach the server is tried again: the agent
// hears "approved" once, and the outcome once it is final.
func TestEngineRetriedReplayTellsTheAgentOnce(t *testing.T) {
	d := &fakeDecider{resp: decision(guardv1.Effect_EFFECT_ALLOW, "grant")}
	r := NewRegistry(nil)
	attempts := 0
	r.MustRegister(Action{
		Name: "install_packages", CatalogAction: "self_mod.install_packages", ApprovalKind: "install_packages",
		Run: func(context.Context, Call) Outcome {
			if attempts++; attempts == 1 {
				out := Failed("not applied: server unavailable")
				out.Undecided = true
				return out
			}
			return Done(nil, "installed")
		},
	})
	n := &notices{}
	e := &Engine{Registry: r, Decider: d, Applier: d, Notifier: n}
	replay := &guardv1.ReplayAction{HoldId: "hold_r", DeliveryAction: "install_packages", Payload: pkgs(t)}
	if out := e.Replay(context.Background(), sess, replay); !out.Undecided {
		t.Fatalf("first attempt = %+v, want not final", out)
	}
	if out := e.Replay(context.Background(), sess, replay); out.Status != agentv1.SendStatus_SEND_STATUS_DONE {
		t.Fatalf("second attempt = %+v", out)
	}
	if k := n.kinds(); len(k) != 2 || k[0] != agentv1.NoticeKind_NOTICE_KIND_APPROVED || k[1] != agentv1.NoticeKind_NOTICE_KIND_RESULT {
		t.Fatalf("notices = %v, want APPROVED once then RESULT", k)
	}
}

// Issue 29, item 11: a hold whose approval the database forgot is approved
// and replayed again. The replay carries the hold id to the handler (what it
// does outside the database is named by it), and the agent is not told
// "approved" or the same outcome twice — each keyed by the hold.
func TestEngineHoldReplayedAgainIsToldOnceAndNamedByTheHold(t *testing.T) {
	d := &fakeDecider{resp: decision(guardv1.Effect_EFFECT_ALLOW, "grant")}
	var ran []Call
	e, n := newEngine(d, &ran)
	replay := &guardv1.ReplayAction{HoldId: "hold_9", DeliveryAction: "install_packages", Payload: pkgs(t)}
	for range 2 {
		e.Replay(context.Background(), sess, replay)
		e.approvedTold.Clear() // a runner restarted in between remembers nothing in memory
	}
	if len(ran) != 2 || ran[0].HoldID != "hold_9" || ran[1].HoldID != "hold_9" {
		t.Fatalf("runs %+v, want two carrying hold_9", ran)
	}
	if k := n.kinds(); len(k) != 2 || k[0] != agentv1.NoticeKind_NOTICE_KIND_APPROVED || k[1] != agentv1.NoticeKind_NOTICE_KIND_RESULT {
		t.Fatalf("notices %v, want approved and result once", k)
	}
	// A different outcome of the same hold is news: it is told.
	d.resp = decision(guardv1.Effect_EFFECT_DENY, "revoked meanwhile")
	e.Replay(context.Background(), sess, replay)
	if k := n.kinds(); len(k) != 3 || k[2] != agentv1.NoticeKind_NOTICE_KIND_DENIED {
		t.Fatalf("notices %v, want the denial told", k)
	}
}

// Issue 29, item 13: a replay refused because the session moved read "the
// guard could not be reached (PermissionDenied …)". The words now say what
// happened, and only a refusal for a session this runner no longer hosts
// counts as moved.
func TestEngineSaysWhyTheGuardGaveNoDecision(t *testing.T) {
	for _, tc := range []struct {
		err              error
		want, notWant    string
		moved, undecided bool
	}{
		{status.Error(codes.PermissionDenied, `runner "r1" does not host session "s1" of group "g1"`),
			"no longer hosts the session", "could not be reached", true, false},
		{status.Error(codes.PermissionDenied, "payload differs from the one approved in hold h"),
			"the guard refused the request", "no longer hosts", false, false},
		{status.Error(codes.Unavailable, "database down"), "could not be reached", "no longer hosts", false, true},
		{status.Error(codes.Internal, "boom"), "gave no decision", "could not be reached", false, false},
	} {
		var ran []Call
		e, _ := newEngine(&fakeDecider{err: tc.err}, &ran)
		out := e.Replay(context.Background(), sess, &guardv1.ReplayAction{HoldId: "h", DeliveryAction: "install_packages", Payload: pkgs(t)})
		if !strings.Contains(out.Reason, tc.want) || strings.Contains(out.Reason, tc.notWant) || out.NotHosted != tc.moved || out.Undecided != tc.undecided {
			t.Errorf("%v: reason %q moved=%v undecided=%v; want %q, not %q, moved=%v undecided=%v",
				tc.err, out.Reason, out.NotHosted, out.Undecided, tc.want, tc.notWant, tc.moved, tc.undecided)
		}
		sub := e.Submit(context.Background(), sess, "r1", "install_packages", pkgs(t))
		if !strings.Contains(sub.Reason, tc.want) || strings.Contains(sub.Reason, tc.notWant) {
			t.Errorf("%v: a fresh send's reason %q; want %q, not %q", tc.err, sub.Reason, tc.want, tc.notWant)
		}
	}
}
