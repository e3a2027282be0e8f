package registry_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// heldSend is a message A → B held by B's policy and approved by its
// approver: the hold a replay push names.
func (w a2aWorld) heldSend(t *testing.T, text string) string {
	t.Helper()
	held := w.send(t, w.b, w.b, text, "", true)
	if held.GetHoldId() == "" {
		t.Fatalf("send to B: %v, want a hold", held)
	}
	if _, err := w.srv.Operator(t).Approvals.Resolve(ctxT(t), &guardv1.ResolveRequest{Id: held.GetHoldId(),
		Outcome: guardv1.Outcome_OUTCOME_APPROVE, AsUser: "tg:dana"}); err != nil {
		t.Fatalf("approve: %v", err)
	}
	return held.GetHoldId()
}

// replay is the runner's one call for an approved hold: the hold named,
// only its stamps sent.
func (w a2aWorld) replay(t *testing.T, hold string, stamps map[string]any) (*guardv1.ApplyActionResponse, error) {
	t.Helper()
	return w.r.c.Registry.ApplyAction(ctxT(t), &guardv1.ApplyActionRequest{Grant: hold, SessionId: w.sess.GetId(),
		Action: "a2a.send", Payload: payload(t, stamps)})
}

func (w a2aWorld) holdState(t *testing.T, hold string) (consumed, applied bool) {
	t.Helper()
	if err := w.srv.Pool.QueryRow(ctxT(t), `SELECT consumed_at IS NOT NULL, applied_at IS NOT NULL FROM holds WHERE id = $1`, hold).
		Scan(&consumed, &applied); err != nil {
		t.Fatal(err)
	}
	return consumed, applied
}

// Issue 42: an approved hold is replayed in one round trip — the runner
// names the hold, the server decides the replay live, consumes the grant
// and applies the payload it holds, in one transaction — and applied once:
// the same call again answers the recorded result.
func TestAnApprovedHoldIsDecidedAndAppliedInOneCall(t *testing.T) {
	t.Parallel()
	w := newA2AWorld(t)
	hold := w.heldSend(t, "approved text")
	res, err := w.replay(t, hold, map[string]any{"id": "m_" + hold})
	if err != nil || res.GetDecision().GetEffect() != guardv1.Effect_EFFECT_ALLOW || res.GetDecisionId() == "" {
		t.Fatalf("replay by hold: %v (%v), want an ALLOW applied", res, err)
	}
	if consumed, applied := w.holdState(t, hold); !consumed || !applied {
		t.Fatalf("hold after its replay: consumed=%v applied=%v", consumed, applied)
	}
	if n := w.deliveries(t, w.b); n != 1 {
		t.Fatalf("deliveries to B: %d, want 1", n)
	}
	var body []byte
	if err := w.srv.Pool.QueryRow(ctxT(t), `SELECT body FROM runner_pushes p
		JOIN sessions s ON s.id = p.session_id WHERE s.agent_group_id = $1 AND p.kind = 'deliver'`, w.b).Scan(&body); err != nil {
		t.Fatal(err)
	}
	var push guardv1.Push
	if err := proto.Unmarshal(body, &push); err != nil {
		t.Fatal(err)
	}
	if d := push.GetDeliver(); d.GetText() != "approved text" || d.GetMessageId() != "m_"+hold {
		t.Fatalf("delivered %q as %q, want the held text as m_%s", d.GetText(), d.GetMessageId(), hold)
	}
	again, err := w.replay(t, hold, map[string]any{"id": "m_" + hold})
	if err != nil || again.GetDecisionId() != res.GetDecisionId() || again.GetMessage() != res.GetMessage() {
		t.Fatalf("the same replay again: %v (%v), want the recorded answer of %s", again, err, res.GetDecisionId())
	}
	assertAppliedOnce(t, w.srv, w.sess.GetId(), "a2a.send")
}

// D3 on the one-call replay: a destination removed after the approval, or
// the agent's runner frozen, denies it; the DENY is logged, nothing is
// applied and the grant stays unused.
func TestAReplayByHoldIsDeniedByWhatChangedSinceTheApproval(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, why string
		change    func(w a2aWorld)
	}{
		{"destination removed", "no destination", func(w a2aWorld) {
			if _, err := w.srv.Pool.Exec(ctxT(t), `DELETE FROM agent_destinations WHERE agent_group_id = $1`, w.group); err != nil {
				t.Fatal(err)
			}
		}},
		{"runner frozen", "frozen", func(w a2aWorld) {
			if _, err := w.srv.Operator(t).Registry.Freeze(ctxT(t), &guardv1.FreezeRequest{Scope: guardv1.FreezeScope_FREEZE_SCOPE_RUNNER,
				Runner: w.r.id, Reason: "incident"}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newA2AWorld(t)
			hold := w.heldSend(t, "after the change")
			tc.change(w)
			res, err := w.replay(t, hold, map[string]any{"id": "m_" + hold})
			if err != nil || res.GetDecision().GetEffect() != guardv1.Effect_EFFECT_DENY || !strings.Contains(res.GetDecision().GetReason(), tc.why) {
				t.Fatalf("replay after %s: %v (%v), want a DENY naming %q", tc.name, res, err, tc.why)
			}
			if consumed, applied := w.holdState(t, hold); consumed || applied {
				t.Fatalf("hold after a denied replay: consumed=%v applied=%v, want neither", consumed, applied)
			}
			if n := w.deliveries(t, w.b); n != 0 {
				t.Fatalf("deliveries to B: %d, want none", n)
			}
			var logged int
			if err := w.srv.Pool.QueryRow(ctxT(t), `SELECT count(*) FROM decisions WHERE session_id = $1 AND effect = 'deny' AND grant_id = $2`,
				w.sess.GetId(), hold).Scan(&logged); err != nil || logged != 1 {
				t.Fatalf("denied replays logged: %d (%v), want 1", logged, err)
			}
		})
	}
}

// What a one-call replay refuses before deciding anything: payload keys
// the runner does not stamp (the payload is the hold's), a decision_id
// beside the grant, a hold nobody approved, a session the runner does not
// host.
func TestAReplayByHoldRefusesWhatIsNotItsOwn(t *testing.T) {
	t.Parallel()
	w := newA2AWorld(t)
	hold := w.heldSend(t, "only this")
	pending := w.send(t, w.b, w.b, "still pending", "", true).GetHoldId()
	other := w.r.open(t, group(t, w.srv, "other", ""))
	for _, tc := range []struct {
		name string
		req  *guardv1.ApplyActionRequest
		code codes.Code
	}{
		{"another text", &guardv1.ApplyActionRequest{Grant: hold, SessionId: w.sess.GetId(), Action: "a2a.send",
			Payload: payload(t, map[string]any{"text": "something else"})}, codes.InvalidArgument},
		{"a decision beside the grant", &guardv1.ApplyActionRequest{Grant: hold, DecisionId: "dec_x", SessionId: w.sess.GetId(), Action: "a2a.send"},
			codes.InvalidArgument},
		{"a pending hold", &guardv1.ApplyActionRequest{Grant: pending, SessionId: w.sess.GetId(), Action: "a2a.send"}, codes.FailedPrecondition},
		{"another session's hold", &guardv1.ApplyActionRequest{Grant: hold, SessionId: other.GetId(), Action: "a2a.send"}, codes.PermissionDenied},
		{"another action", &guardv1.ApplyActionRequest{Grant: hold, SessionId: w.sess.GetId(), Action: "agents.create",
			Payload: &structpb.Struct{}}, codes.FailedPrecondition},
	} {
		if _, err := w.r.c.Registry.ApplyAction(ctxT(t), tc.req); status.Code(err) != tc.code {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
	}
	if consumed, applied := w.holdState(t, hold); consumed || applied {
		t.Fatalf("refused replays touched the hold: consumed=%v applied=%v", consumed, applied)
	}
	if n := w.deliveries(t, w.b); n != 0 {
		t.Fatalf("deliveries to B: %d, want none", n)
	}
}

// A replay the guard cannot decide (the decision log refuses inserts) is
// Unavailable — nothing decided, the grant unused — and applied once when
// asked again.
func TestAReplayByHoldTheGuardCannotDecideIsRetryable(t *testing.T) {
	t.Parallel()
	w := newA2AWorld(t)
	hold := w.heldSend(t, "later")
	restore := refuseDecisionLog(t, w.srv)
	if _, err := w.replay(t, hold, nil); status.Code(err) != codes.Unavailable {
		t.Fatalf("replay while the log refuses inserts: %v, want Unavailable", err)
	}
	if consumed, applied := w.holdState(t, hold); consumed || applied {
		t.Fatalf("an undecided replay touched the hold: consumed=%v applied=%v", consumed, applied)
	}
	restore()
	if res, err := w.replay(t, hold, nil); err != nil || res.GetDecision().GetEffect() != guardv1.Effect_EFFECT_ALLOW {
		t.Fatalf("replay once the log accepts rows: %v (%v)", res, err)
	}
	assertAppliedOnce(t, w.srv, w.sess.GetId(), "a2a.send")
}
