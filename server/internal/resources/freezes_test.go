package resources_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// freezeWorld: groups research and ops, research's agent on runner r1 with
// a destination to ops (its a2a.send is allowed), two replicas.
type freezeWorld struct {
	a, b          *testserver.Server
	op            testserver.Clients
	agentA        testserver.Clients // research's agent, its runner on replica a
	agentB        testserver.Clients // the same agent through replica b
	research, ops string
}

func newFreezeWorld(t *testing.T) *freezeWorld {
	t.Helper()
	a, op := start(t)
	w := &freezeWorld{a: a, b: testserver.StartOn(t, a.URL), op: op}
	ctx := context.Background()
	w.research = must[*guardv1.CreateGroupResponse](t)(op.Registry.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: "research"})).GetGroup().GetId()
	w.ops = must[*guardv1.CreateGroupResponse](t)(op.Registry.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: "ops"})).GetGroup().GetId()
	must[*guardv1.AddDestinationResponse](t)(op.Registry.AddDestination(ctx, &guardv1.AddDestinationRequest{Group: w.research, Name: "ops", TargetGroup: w.ops}))
	exec(t, a, `INSERT INTO runners (id, host, lease_expires_at) VALUES ('r1', 'h1', now() + interval '1 hour'), ('r2', 'h2', now() + interval '1 hour')`)
	exec(t, a, `INSERT INTO sessions (id, agent_group_id, runner_id) VALUES ('s1', $1, 'r1')`, w.research)
	tok := a.Token(t, "runner", "r1", "")
	w.agentA = testserver.ClientsFor(a.Conn(t, tok, "s1"))
	w.agentB = testserver.ClientsFor(b(w).Conn(t, tok, "s1"))
	return w
}

func b(w *freezeWorld) *testserver.Server { return w.b }

// send is the agent asking to message ops through one replica.
func (w *freezeWorld) send(t *testing.T, via testserver.Clients) *guardv1.Decision {
	t.Helper()
	resp, err := via.Guard.Decide(context.Background(), &guardv1.DecideRequest{Action: "a2a.send", Resource: map[string]string{"to": w.ops}})
	if err != nil {
		t.Fatalf("decide: %v", err)
	}
	return resp.GetDecision()
}

// Issue 32: from the freeze's commit on, every decision of an agent in the
// scope denies on every replica — the one that froze and the other —
// whatever the mode; unfreezing restores exactly what was.
func TestAFreezeDeniesOnEveryReplicaFromItsCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newFreezeWorld(t)
	// Audit mode would let a held send run: a freeze is not relaxed by it.
	must[*guardv1.SetActionSettingsResponse](t)(w.op.Registry.SetActionSettings(ctx, &guardv1.SetActionSettingsRequest{Action: "a2a.send", Mode: guardv1.EnforcementMode_ENFORCEMENT_MODE_AUDIT}))
	for _, via := range []testserver.Clients{w.agentA, w.agentB} {
		if d := w.send(t, via); d.GetEffect() != guardv1.Effect_EFFECT_ALLOW {
			t.Fatalf("before the freeze: %v", d)
		}
	}
	for _, scope := range []*guardv1.FreezeRequest{
		{Scope: guardv1.FreezeScope_FREEZE_SCOPE_GROUP, Group: w.research, Reason: "incident 42"},
		{Scope: guardv1.FreezeScope_FREEZE_SCOPE_RUNNER, Runner: "r1"},
		{Scope: guardv1.FreezeScope_FREEZE_SCOPE_ALL, Reason: "fleet"},
	} {
		f := must[*guardv1.FreezeResponse](t)(w.op.Registry.Freeze(ctx, scope)).GetFreeze()
		if f.GetFrozenBy() != "operator" || f.GetFrozenAt() == nil {
			t.Fatalf("freeze %v", f)
		}
		// No wait: the RPC has returned, so the freeze is committed, and no
		// replica answers from a copy older than that.
		for name, via := range map[string]testserver.Clients{"a": w.agentA, "b": w.agentB} {
			d := w.send(t, via)
			if d.GetEffect() != guardv1.Effect_EFFECT_DENY || !strings.Contains(d.GetReason(), "frozen") || d.GetDecidedBy() != "freeze" {
				t.Errorf("%v frozen, replica %s answered %v", scope.GetScope(), name, d)
			}
		}
		unscope := &guardv1.UnfreezeRequest{Scope: scope.GetScope(), Group: scope.GetGroup(), Runner: scope.GetRunner()}
		must[*guardv1.UnfreezeResponse](t)(w.op.Registry.Unfreeze(ctx, unscope))
		for name, via := range map[string]testserver.Clients{"a": w.agentA, "b": w.agentB} {
			if d := w.send(t, via); d.GetEffect() != guardv1.Effect_EFFECT_ALLOW {
				t.Errorf("unfrozen %v, replica %s answered %v", scope.GetScope(), name, d)
			}
		}
		_, err := w.op.Registry.Unfreeze(ctx, unscope)
		wantCode(t, err, codes.NotFound, "")
	}
	// Another group's or runner's freeze leaves this agent alone.
	must[*guardv1.FreezeResponse](t)(w.op.Registry.Freeze(ctx, &guardv1.FreezeRequest{Scope: guardv1.FreezeScope_FREEZE_SCOPE_GROUP, Group: w.ops}))
	must[*guardv1.FreezeResponse](t)(w.op.Registry.Freeze(ctx, &guardv1.FreezeRequest{Scope: guardv1.FreezeScope_FREEZE_SCOPE_RUNNER, Runner: "r2"}))
	if d := w.send(t, w.agentB); d.GetEffect() != guardv1.Effect_EFFECT_ALLOW {
		t.Errorf("ops and r2 frozen, research's agent on r1 answered %v", d)
	}
	list := must[*guardv1.ListFreezesResponse](t)(w.op.Registry.ListFreezes(ctx, &guardv1.ListFreezesRequest{})).GetFreezes()
	if len(list) != 2 {
		t.Errorf("freezes listed: %v", list)
	}
}

// Who may freeze: a group's admin its group only; the fleet and runners
// need an owner or a global admin. Bad requests are refused before anything.
func TestWhoMayFreeze(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newFreezeWorld(t)
	exec(t, w.a, `INSERT INTO users (id) VALUES ('telegram:dana'), ('telegram:olga')`)
	exec(t, w.a, `INSERT INTO user_roles (user_id, role, agent_group_id) VALUES ('telegram:dana', 'admin', $1)`, w.research)
	exec(t, w.a, `INSERT INTO user_roles (user_id, role) VALUES ('telegram:olga', 'owner')`)
	dana := testserver.ClientsFor(w.a.Conn(t, w.a.Token(t, "user", "", "telegram:dana"), ""))
	olga := testserver.ClientsFor(w.a.Conn(t, w.a.Token(t, "user", "", "telegram:olga"), ""))

	f := must[*guardv1.FreezeResponse](t)(dana.Registry.Freeze(ctx, &guardv1.FreezeRequest{Scope: guardv1.FreezeScope_FREEZE_SCOPE_GROUP, Group: w.research, Reason: "mine"})).GetFreeze()
	if f.GetFrozenBy() != "telegram:dana" {
		t.Errorf("frozen by %q", f.GetFrozenBy())
	}
	for _, req := range []*guardv1.FreezeRequest{
		{Scope: guardv1.FreezeScope_FREEZE_SCOPE_GROUP, Group: w.ops},
		{Scope: guardv1.FreezeScope_FREEZE_SCOPE_ALL},
		{Scope: guardv1.FreezeScope_FREEZE_SCOPE_RUNNER, Runner: "r1"},
	} {
		_, err := dana.Registry.Freeze(ctx, req)
		wantCode(t, err, codes.PermissionDenied, "")
	}
	must[*guardv1.FreezeResponse](t)(olga.Registry.Freeze(ctx, &guardv1.FreezeRequest{Scope: guardv1.FreezeScope_FREEZE_SCOPE_ALL}))
	for _, bad := range []*guardv1.FreezeRequest{
		{},
		{Scope: guardv1.FreezeScope_FREEZE_SCOPE_GROUP},
		{Scope: guardv1.FreezeScope_FREEZE_SCOPE_ALL, Group: w.ops},
		{Scope: guardv1.FreezeScope_FREEZE_SCOPE_RUNNER, Runner: "r1", Group: w.ops},
	} {
		_, err := w.op.Registry.Freeze(ctx, bad)
		wantCode(t, err, codes.InvalidArgument, "")
	}
	_, err := w.op.Registry.Freeze(ctx, &guardv1.FreezeRequest{Scope: guardv1.FreezeScope_FREEZE_SCOPE_RUNNER, Runner: "nowhere"})
	wantCode(t, err, codes.NotFound, "")
	// A frozen agent's own freeze or unfreeze is a decision like the rest:
	// denied, so an agent cannot lift its freeze.
	_, err = w.agentA.Registry.Unfreeze(ctx, &guardv1.UnfreezeRequest{Scope: guardv1.FreezeScope_FREEZE_SCOPE_GROUP, Group: w.research})
	wantCode(t, err, codes.PermissionDenied, "")
	if err == nil || !strings.Contains(err.Error(), "frozen") {
		t.Errorf("a frozen agent's unfreeze: %v, want denied as frozen (not even held)", err)
	}
	// The people who lift it are still heard.
	must[*guardv1.UnfreezeResponse](t)(olga.Registry.Unfreeze(ctx, &guardv1.UnfreezeRequest{Scope: guardv1.FreezeScope_FREEZE_SCOPE_ALL}))
	must[*guardv1.UnfreezeResponse](t)(dana.Registry.Unfreeze(ctx, &guardv1.UnfreezeRequest{Scope: guardv1.FreezeScope_FREEZE_SCOPE_GROUP, Group: w.research}))
	if d := w.send(t, w.agentA); d.GetEffect() != guardv1.Effect_EFFECT_ALLOW {
		t.Errorf("after both unfreezes: %v", d)
	}

	// Issue 41 item 10: lifting a freeze needs the authority that made it.
	// The owner's freeze of research is not its admin's to lift; the
	// admin's own freeze is the admin's and the owner's.
	freeze := &guardv1.FreezeRequest{Scope: guardv1.FreezeScope_FREEZE_SCOPE_GROUP, Group: w.research, Reason: "incident"}
	unfreeze := &guardv1.UnfreezeRequest{Scope: guardv1.FreezeScope_FREEZE_SCOPE_GROUP, Group: w.research}
	must[*guardv1.FreezeResponse](t)(olga.Registry.Freeze(ctx, freeze))
	_, err = dana.Registry.Unfreeze(ctx, unfreeze)
	wantCode(t, err, codes.PermissionDenied, "frozen by telegram:olga")
	if d := w.send(t, w.agentA); d.GetEffect() != guardv1.Effect_EFFECT_DENY {
		t.Errorf("the refused unfreeze lifted the owner's freeze: %v", d)
	}
	must[*guardv1.UnfreezeResponse](t)(olga.Registry.Unfreeze(ctx, unfreeze))
	must[*guardv1.FreezeResponse](t)(dana.Registry.Freeze(ctx, freeze))
	must[*guardv1.UnfreezeResponse](t)(olga.Registry.Unfreeze(ctx, unfreeze))
}

// A frozen agent's pending hold stays pending: approving it is refused
// until the freeze is lifted (its replay would only be denied).
func TestAFrozenAgentsHoldStaysPending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newFreezeWorld(t)
	exec(t, w.a, `INSERT INTO users (id) VALUES ('telegram:dana')`)
	must[*guardv1.SetPolicyResponse](t)(w.op.Registry.SetPolicy(ctx, &guardv1.SetPolicyRequest{FromGroup: w.research, ToGroup: w.ops, ApproverUserId: "telegram:dana"}))
	payload, _ := structpb.NewStruct(map[string]any{"to": w.ops, "text": "hi"})
	held, err := w.agentA.Guard.Decide(ctx, &guardv1.DecideRequest{Action: "a2a.send", Resource: map[string]string{"to": w.ops}, Payload: payload,
		Card: &guardv1.HoldCard{Title: "research → ops: hi", Question: "May research message ops?", DeliveryAction: "send_message"}})
	if err != nil || held.GetHoldId() == "" {
		t.Fatalf("hold: %v %v", held, err)
	}
	must[*guardv1.FreezeResponse](t)(w.op.Registry.Freeze(ctx, &guardv1.FreezeRequest{Scope: guardv1.FreezeScope_FREEZE_SCOPE_RUNNER, Runner: "r1"}))
	approve := &guardv1.ResolveRequest{Id: held.GetHoldId(), Outcome: guardv1.Outcome_OUTCOME_APPROVE, AsUser: "telegram:dana"}
	_, err = w.op.Approvals.Resolve(ctx, approve)
	wantCode(t, err, codes.FailedPrecondition, "")
	if h := must[*guardv1.GetResponse](t)(w.op.Approvals.Get(ctx, &guardv1.GetRequest{Id: held.GetHoldId()})).GetHold(); h.GetStatus() != guardv1.HoldStatus_HOLD_STATUS_PENDING {
		t.Fatalf("after a refused approval the hold is %v", h.GetStatus())
	}
	must[*guardv1.UnfreezeResponse](t)(w.op.Registry.Unfreeze(ctx, &guardv1.UnfreezeRequest{Scope: guardv1.FreezeScope_FREEZE_SCOPE_RUNNER, Runner: "r1"}))
	if h := must[*guardv1.ResolveResponse](t)(w.op.Approvals.Resolve(ctx, approve)).GetHold(); h.GetStatus() != guardv1.HoldStatus_HOLD_STATUS_APPROVED {
		t.Fatalf("after the unfreeze the approval left the hold %v", h.GetStatus())
	}
}

// The freeze stops the agents in scope (a stop push per active session, in
// its transaction) and the unfreeze starts them again — unless another
// freeze still covers them.
func TestAFreezeStopsItsAgentsAndTheUnfreezeStartsThem(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newFreezeWorld(t)
	pushes := func(kind string) int {
		var n int
		if err := w.a.Pool.QueryRow(ctx, `SELECT count(*) FROM runner_pushes WHERE session_id = 's1' AND kind = $1`, kind).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	group := &guardv1.FreezeRequest{Scope: guardv1.FreezeScope_FREEZE_SCOPE_GROUP, Group: w.research, Reason: "incident"}
	must[*guardv1.FreezeResponse](t)(w.op.Registry.Freeze(ctx, group))
	if pushes("stop") != 1 {
		t.Fatalf("stop pushes after the freeze: %d, want 1", pushes("stop"))
	}
	must[*guardv1.FreezeResponse](t)(w.op.Registry.Freeze(ctx, &guardv1.FreezeRequest{Scope: guardv1.FreezeScope_FREEZE_SCOPE_ALL}))
	must[*guardv1.UnfreezeResponse](t)(w.op.Registry.Unfreeze(ctx, &guardv1.UnfreezeRequest{Scope: group.GetScope(), Group: w.research}))
	if pushes("start") != 0 {
		t.Fatal("the group's unfreeze started an agent the fleet's freeze still covers")
	}
	must[*guardv1.UnfreezeResponse](t)(w.op.Registry.Unfreeze(ctx, &guardv1.UnfreezeRequest{Scope: guardv1.FreezeScope_FREEZE_SCOPE_ALL}))
	if pushes("start") != 1 {
		t.Fatalf("start pushes after the last unfreeze: %d, want 1", pushes("start"))
	}
}
