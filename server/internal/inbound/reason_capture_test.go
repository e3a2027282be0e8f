package inbound_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// reasonFixture: Dana is admin of research and has a Telegram DM; an agent
// session of research asked for something and its hold (default card:
// Approve / Reject / Reject with reason…) waits for her.
type reasonFixture struct {
	*fixture
	hold *guardv1.Hold
}

const (
	dana     = "telegram:111"
	danaChat = "111"
	research = "ag_research"
	session  = "sess_research"
)

func newReasonFixture(t *testing.T) *reasonFixture {
	f := newFixture(t)
	f.group(research, "research")
	f.user(dana, "admin", research)
	f.dm(dana, "telegram", danaChat)
	f.user("telegram:999", "owner", "")
	f.exec(`INSERT INTO sessions (id, agent_group_id, runner_id) VALUES ($1, $2, $3)`, session, research, runnerID)
	resp, err := f.srv.Operator(t).Approvals.Request(context.Background(), &guardv1.RequestRequest{
		Kind: "onecli_credential", SessionId: session,
		Card: &guardv1.HoldCard{Title: "Use the deploy key", Question: "research wants the deploy key"},
	})
	if err != nil {
		t.Fatalf("Approvals.Request: %v", err)
	}
	return &reasonFixture{fixture: f, hold: resp.GetHold()}
}

// pickRejectWithReason is the approver's tap on "Reject with reason…".
func (f *reasonFixture) pickRejectWithReason(asUser string) *guardv1.Hold {
	f.t.Helper()
	resp, err := f.bridge.Approvals.Resolve(context.Background(), &guardv1.ResolveRequest{
		Id: f.hold.GetId(), Outcome: guardv1.Outcome_OUTCOME_REJECT, AsUser: asUser, Choice: "reject_with_reason",
	})
	if err != nil {
		f.t.Fatalf("Reject with reason… as %s: %v", asUser, err)
	}
	return resp.GetHold()
}

func (f *reasonFixture) dmFromDana(text string) *guardv1.RouteInboundResponse {
	return f.route(&guardv1.RouteInboundRequest{ChannelType: "telegram", PlatformId: danaChat,
		SenderUserId: dana, SenderName: "Dana", MessageId: msgID(), Text: text})
}

func (f *reasonFixture) status() string {
	return f.str(`SELECT status FROM holds WHERE id = $1`, f.hold.GetId())
}

// notices are the texts of the notices pushed to the requesting session.
func (f *reasonFixture) notices() []string {
	f.t.Helper()
	rows, err := f.srv.Pool.Query(context.Background(), `SELECT body FROM runner_pushes
		WHERE session_id = $1 AND kind = 'notify' ORDER BY created_at`, session)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var body []byte
		if err := rows.Scan(&body); err != nil {
			f.t.Fatal(err)
		}
		p := &guardv1.Push{}
		if err := proto.Unmarshal(body, p); err != nil {
			f.t.Fatal(err)
		}
		out = append(out, p.GetNotify().GetText())
	}
	return out
}

func TestRejectWithReasonCapturesTheApproversNextDM(t *testing.T) {
	f := newReasonFixture(t)
	armed := f.pickRejectWithReason(dana)
	if armed.GetStatus() != guardv1.HoldStatus_HOLD_STATUS_PENDING || armed.GetAwaitingReasonFrom() != dana {
		t.Fatalf("after Reject with reason…: status %s awaiting %q, want pending awaiting %s", armed.GetStatus(), armed.GetAwaitingReasonFrom(), dana)
	}
	// While Dana owes the reason, nobody else resolves it, not even an owner.
	if err := f.click(f.hold.GetId(), "telegram:999", guardv1.Outcome_OUTCOME_APPROVE, ""); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("owner approving a hold awaiting Dana's reason: %v, want FailedPrecondition", err)
	}
	// The state is on the hold: a second replica sees it (restart-safe).
	other := testserver.StartOn(t, f.srv.URL)
	got, err := other.Operator(t).Approvals.Get(context.Background(), &guardv1.GetRequest{Id: f.hold.GetId()})
	if err != nil || got.GetHold().GetAwaitingReasonFrom() != dana {
		t.Fatalf("Get on another replica: %v awaiting %q", err, got.GetHold().GetAwaitingReasonFrom())
	}

	long := strings.Repeat("x", 300)
	r := f.dmFromDana("not during the freeze " + long)
	if r.GetOutcome() != guardv1.RouteOutcome_ROUTE_OUTCOME_REASON_CAPTURED || r.GetHoldId() != f.hold.GetId() {
		t.Fatalf("Dana's DM: %v, want REASON_CAPTURED for %s", r, f.hold.GetId())
	}
	if st := f.status(); st != "rejected" {
		t.Fatalf("hold status %s, want rejected", st)
	}
	reason := f.str(`SELECT reason FROM holds WHERE id = $1`, f.hold.GetId())
	if !strings.HasPrefix(reason, "not during the freeze") || len([]rune(reason)) != 280 {
		t.Fatalf("stored reason %q (%d chars), want the DM clamped to 280", reason, len([]rune(reason)))
	}
	ev := f.awaitEvent(guardv1.EventType_EVENT_TYPE_RESOLVED, f.hold.GetId())
	if ev.GetResolver() != dana || ev.GetOutcome() != guardv1.Outcome_OUTCOME_REJECT || ev.GetHold().GetReason() != reason {
		t.Fatalf("resolved event %v, want reject by %s with the reason", ev, dana)
	}
	notices := f.notices()
	if len(notices) != 1 || !strings.Contains(notices[0], "not during the freeze") {
		t.Fatalf("notices to the requesting session %q, want one carrying the reason", notices)
	}
	// The capture is spent: Dana's next DM is an ordinary message.
	if r := f.dmFromDana("thanks"); r.GetOutcome() == guardv1.RouteOutcome_ROUTE_OUTCOME_REASON_CAPTURED {
		t.Fatalf("a second DM was captured as a reason too: %v", r)
	}
}

func TestRejectWithReasonCaptureEndsWhenTheRoleIsRevoked(t *testing.T) {
	f := newReasonFixture(t)
	f.pickRejectWithReason(dana)
	f.exec(`DELETE FROM user_roles WHERE user_id = $1`, dana)

	r := f.dmFromDana("nope")
	if r.GetOutcome() != guardv1.RouteOutcome_ROUTE_OUTCOME_DROPPED || !strings.Contains(r.GetReason(), "refused") {
		t.Fatalf("reason after revocation: %v, want DROPPED (refused)", r)
	}
	if st := f.status(); st != "pending" {
		t.Fatalf("hold %s after a refused reason, want pending (still approvable by others)", st)
	}
	if a := f.str(`SELECT awaiting_reason_from FROM holds WHERE id = $1`, f.hold.GetId()); a != "" {
		t.Fatalf("capture still armed for %q", a)
	}
	if n := len(f.notices()); n != 0 {
		t.Fatalf("%d notices reached the requester; a refused reason must reach nobody", n)
	}
	// The owner may resolve it now that nobody owes a reason.
	f.mustClick(f.hold.GetId(), "telegram:999", guardv1.Outcome_OUTCOME_REJECT, "")
}

func TestRejectWithReasonCaptureEndsWhenTheHoldExpires(t *testing.T) {
	f := newReasonFixture(t)
	f.pickRejectWithReason(dana)
	f.exec(`UPDATE holds SET expires_at = now() - interval '1 second' WHERE id = $1`, f.hold.GetId())

	r := f.dmFromDana("too late")
	if r.GetOutcome() == guardv1.RouteOutcome_ROUTE_OUTCOME_REASON_CAPTURED {
		t.Fatalf("a reason for an expired hold was captured: %v", r)
	}
	if st := f.status(); st == "rejected" {
		t.Fatal("an expired hold was rejected by a late reason")
	}
	for _, n := range f.notices() {
		if strings.Contains(n, "too late") {
			t.Fatalf("the late reason reached the requester: %q", n)
		}
	}
}

func TestRejectWithReasonOnASessionlessHoldRejectsAtOnce(t *testing.T) {
	f := newFixture(t)
	f.user("telegram:999", "owner", "")
	resp, err := f.srv.Operator(t).Approvals.Request(context.Background(), &guardv1.RequestRequest{
		Kind: "onecli_credential", Card: &guardv1.HoldCard{Title: "Use a key"},
	})
	if err != nil {
		t.Fatal(err)
	}
	f.mustClick(resp.GetHold().GetId(), "telegram:999", guardv1.Outcome_OUTCOME_REJECT, "reject_with_reason")
	if st := f.str(`SELECT status FROM holds WHERE id = $1`, resp.GetHold().GetId()); st != "rejected" {
		t.Fatalf("sessionless hold after Reject with reason…: %s, want rejected (nobody to relay a reason to)", st)
	}
}

func TestRejectWithReasonTypedThroughResolve(t *testing.T) {
	f := newReasonFixture(t)
	f.pickRejectWithReason(dana)
	// The "call carrying the reason text": the same approver's REJECT with a reason.
	if _, err := f.bridge.Approvals.Resolve(context.Background(), &guardv1.ResolveRequest{
		Id: f.hold.GetId(), Outcome: guardv1.Outcome_OUTCOME_REJECT, AsUser: dana, Reason: strings.Repeat("y", 281),
	}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a 281-character reason: %v, want InvalidArgument", err)
	}
	if _, err := f.bridge.Approvals.Resolve(context.Background(), &guardv1.ResolveRequest{
		Id: f.hold.GetId(), Outcome: guardv1.Outcome_OUTCOME_REJECT, AsUser: dana, Reason: "wrong key",
	}); err != nil {
		t.Fatalf("reject with the reason: %v", err)
	}
	if n := f.notices(); len(n) != 1 || !strings.Contains(n[0], "wrong key") {
		t.Fatalf("notices %q, want the reason", n)
	}
}

// A ghosting approver: no reason within the wait, the hold is rejected
// without one (they chose reject) and the requester is told once.
func TestRejectWithReasonLapsesToAPlainReject(t *testing.T) {
	f := newReasonFixture(t)
	f.pickRejectWithReason(dana)
	f.exec(`UPDATE holds SET awaiting_reason_at = now() - interval '1 hour' WHERE id = $1`, f.hold.GetId())
	f.eventually("the lapsed capture rejected", func() bool { return f.status() == "rejected" })
	if r := f.str(`SELECT resolver || '|' || reason FROM holds WHERE id = $1`, f.hold.GetId()); r != dana+"|" {
		t.Fatalf("resolver|reason = %q, want Dana's reject without a reason", r)
	}
	if n := f.notices(); len(n) != 1 || !strings.Contains(n[0], "rejected by "+dana) || !strings.HasSuffix(n[0], "no reason was given.") {
		t.Fatalf("notices %q, want one plain reject, by Dana", n)
	}
}

// The same, but Dana lost her role meanwhile: the capture just ends and the
// hold stays with the other approvers.
func TestALapsedCaptureOfARevokedApproverLeavesTheHoldPending(t *testing.T) {
	f := newReasonFixture(t)
	f.pickRejectWithReason(dana)
	f.exec(`DELETE FROM user_roles WHERE user_id = $1`, dana)
	f.exec(`UPDATE holds SET awaiting_reason_at = now() - interval '1 hour' WHERE id = $1`, f.hold.GetId())
	f.eventually("the lapsed capture disarmed", func() bool {
		return f.str(`SELECT awaiting_reason_from FROM holds WHERE id = $1`, f.hold.GetId()) == ""
	})
	if st := f.status(); st != "pending" {
		t.Fatalf("hold %s, want pending", st)
	}
}
