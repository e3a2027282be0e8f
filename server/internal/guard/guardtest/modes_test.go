package guardtest

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// Enforcement modes (issue 18): a gate in audit or warn mode lets the action
// run and records what enforce would have answered; protections of the
// system itself are always enforced.

// a2aWorld is {A} → {B} with a destination and a message policy naming an
// approver, so a2a.send from {SA} holds in enforce mode.
func a2aWorld(t *testing.T, srv *testserver.Server) *world {
	w := newWorld(t, srv)
	withOwner(w)
	w.exec(`INSERT INTO users (id) VALUES ('telegram:{A}-dana');
		INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) VALUES ('{A}', 'b', '{B}');
		INSERT INTO agent_message_policies (from_agent_group_id, to_agent_group_id, approver_user_id) VALUES ('{A}', '{B}', 'telegram:{A}-dana')`)
	return w
}

func a2aSend(w *world, dryRun bool) *guardv1.DecideRequest {
	return &guardv1.DecideRequest{Action: "a2a.send", Actor: w.actor("agent:{A}:{SA}"),
		Resource: w.resource(map[string]string{"to": "{B}"}),
		Payload:  w.payload(map[string]any{"to": "{B}", "text": "hi"}),
		Card:     &guardv1.HoldCard{Title: "message", Question: "send?"}, DryRun: dryRun}
}

func TestAuditModeRunsAndLogsWhatEnforceWouldDo(t *testing.T) {
	srv := testserver.Start(t)
	op := srv.Operator(t)
	w := a2aWorld(t, srv)
	before := testutil.ToFloat64(srv.Deps().Metrics.ModeDecisionsTotal.WithLabelValues("a2a.send", "audit", "hold"))

	// The policy alone is rolled out in audit mode.
	if _, err := op.Registry.SetPolicy(ctx, &guardv1.SetPolicyRequest{FromGroup: w.A, ToGroup: w.B,
		ApproverUserId: w.sub("telegram:{A}-dana"), Mode: guardv1.EnforcementMode_ENFORCEMENT_MODE_AUDIT}); err != nil {
		t.Fatal(err)
	}
	resp, err := op.Guard.Decide(ctx, a2aSend(w, false))
	if err != nil {
		t.Fatal(err)
	}
	d := resp.GetDecision()
	if d.GetEffect() != guardv1.Effect_EFFECT_ALLOW || d.GetMode() != "audit" || d.GetWouldEffect() != hold ||
		!strings.Contains(d.GetWouldReason(), "message policy") || d.GetDecidedBy() != "mode" {
		t.Fatalf("audit decision: %v", d)
	}
	if resp.GetHoldId() != "" || w.count(`SELECT count(*) FROM holds WHERE session_id = '{SA}'`) != 0 {
		t.Fatal("audit mode created a hold")
	}
	if n := w.count(`SELECT count(*) FROM decisions WHERE id = '` + resp.GetDecisionId() + `'
		AND effect = 'allow' AND mode = 'audit' AND would_effect = 'hold' AND would_reason <> ''`); n != 1 {
		t.Fatal("the decision log does not record the audit answer")
	}
	if got := testutil.ToFloat64(srv.Deps().Metrics.ModeDecisionsTotal.WithLabelValues("a2a.send", "audit", "hold")); got != before+1 {
		t.Fatalf("mode_decisions_total = %v, want %v", got, before+1)
	}
	// The decision log read shows both answers.
	logged, err := op.Registry.ListDecisions(ctx, &guardv1.ListDecisionsRequest{Group: w.A, Action: "a2a.send"})
	if err != nil || len(logged.GetDecisions()) != 1 {
		t.Fatalf("ListDecisions: %v %v", logged, err)
	}
	if r := logged.GetDecisions()[0]; r.GetMode() != "audit" || r.GetWouldEffect() != hold {
		t.Fatalf("logged record: %v", r)
	}

	// Switching the policy to enforce holds the very next decision.
	if _, err := op.Registry.SetPolicy(ctx, &guardv1.SetPolicyRequest{FromGroup: w.A, ToGroup: w.B,
		ApproverUserId: w.sub("telegram:{A}-dana"), Mode: guardv1.EnforcementMode_ENFORCEMENT_MODE_ENFORCE}); err != nil {
		t.Fatal(err)
	}
	w.exec(`INSERT INTO user_dms (user_id, channel_type, address) VALUES ('telegram:{A}-dana', 'telegram', 'dana-dm')`)
	resp, err = op.Guard.Decide(ctx, a2aSend(w, false))
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetDecision().GetEffect() != hold || resp.GetDecision().GetMode() != "" || resp.GetHoldId() == "" {
		t.Fatalf("after enforce: %v", resp)
	}
}

func TestWarnModeTellsTheAgentAndTheGroupsAdmins(t *testing.T) {
	srv := testserver.Start(t)
	op := srv.Operator(t)
	w := a2aWorld(t, srv)
	// The whole action in warn mode; the policy inherits it.
	if _, err := op.Registry.SetActionSettings(ctx, &guardv1.SetActionSettingsRequest{Action: "a2a.send",
		Mode: guardv1.EnforcementMode_ENFORCEMENT_MODE_WARN}); err != nil {
		t.Fatal(err)
	}
	// A dry run (ncl explain) shows both answers and tells nobody.
	dry, err := op.Guard.Decide(ctx, a2aSend(w, true))
	if err != nil {
		t.Fatal(err)
	}
	if dry.GetDecision().GetMode() != "warn" || dry.GetDecision().GetWouldEffect() != hold {
		t.Fatalf("explain: %v", dry.GetDecision())
	}
	if len(notices(t, w, "{SA}")) != 0 || w.count(`SELECT count(*) FROM hold_events WHERE type = 'warned'`) != 0 {
		t.Fatal("a dry run warned")
	}

	resp, err := op.Guard.Decide(ctx, a2aSend(w, false))
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetDecision().GetEffect() != guardv1.Effect_EFFECT_ALLOW || resp.GetDecision().GetMode() != "warn" {
		t.Fatalf("warn decision: %v", resp.GetDecision())
	}
	texts := notices(t, w, "{SA}")
	if len(texts) != 1 || !strings.Contains(texts[0], "warn mode") || !strings.Contains(texts[0], "held for approval") {
		t.Fatalf("agent notices: %q", texts)
	}
	if n := w.count(`SELECT count(*) FROM hold_events WHERE type = 'warned' AND hold_id = '` + resp.GetDecisionId() + `'
		AND hold->>'agentGroupId' = '{A}' AND hold->>'kind' = 'mode_warning'`); n != 1 {
		t.Fatalf("warned events for the decision: %d, want 1", n)
	}
	// The group's admin receives it on Watch; a stranger does not.
	w.exec(`INSERT INTO users (id) VALUES ('telegram:{A}-admin'), ('telegram:{A}-stranger');
		INSERT INTO user_roles (user_id, role, agent_group_id) VALUES ('telegram:{A}-admin', 'admin', '{A}')`)
	admin := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "user", "", w.sub("telegram:{A}-admin")), ""))
	stream, err := admin.Approvals.Watch(ctx, &guardv1.WatchRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatalf("admin's watch ended before the warning: %v", err)
		}
		if ev.GetType() == guardv1.EventType_EVENT_TYPE_WARNED {
			if ev.GetHold().GetId() != resp.GetDecisionId() {
				t.Fatalf("warned event for %s, want %s", ev.GetHold().GetId(), resp.GetDecisionId())
			}
			break
		}
	}
	stranger := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "user", "", w.sub("telegram:{A}-stranger")), ""))
	list, err := stranger.Approvals.List(ctx, &guardv1.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetHolds()) != 0 {
		t.Fatalf("stranger sees %d holds", len(list.GetHolds()))
	}
}

// Protections are never relaxed: a global-scope hold stays a hold, a
// D4-style structural deny stays a deny, and a relaxed allowlist still
// leaves the global hold of what the command touches.
func TestModesNeverRelaxProtections(t *testing.T) {
	srv := testserver.Start(t)
	op := srv.Operator(t)
	w := newWorld(t, srv)
	withOwner(w)
	for _, a := range []string{"roles.grant", "channels.register", "users.create"} {
		if _, err := op.Registry.SetActionSettings(ctx, &guardv1.SetActionSettingsRequest{Action: a,
			Mode: guardv1.EnforcementMode_ENFORCEMENT_MODE_AUDIT}); err != nil {
			t.Fatal(err)
		}
	}
	grant := func() *guardv1.DecideRequest {
		return &guardv1.DecideRequest{Action: "roles.grant", Actor: w.actor("agent:{A}:{SA}"),
			Payload: w.payload(map[string]any{"user_id": "telegram:x", "role": "owner"})}
	}
	// cli_scope global: roles.grant holds at global scope (D1) — enforced.
	w.exec(`INSERT INTO container_configs (agent_group_id, cli_scope) VALUES ('{A}', 'global')`)
	resp, err := op.Guard.Decide(ctx, grant())
	if err != nil {
		t.Fatal(err)
	}
	if d := resp.GetDecision(); d.GetEffect() != hold || d.GetApproverScope() != guardv1.ApproverScope_APPROVER_SCOPE_GLOBAL || d.GetMode() != "" {
		t.Fatalf("global hold under audit: %v", d)
	}
	// cli_scope group: the allowlist deny is relaxed, but what follows it
	// (the global-scope hold) still holds; the log keeps the would-deny.
	w.exec(`UPDATE container_configs SET cli_scope = 'group' WHERE agent_group_id = '{A}'`)
	resp, err = op.Guard.Decide(ctx, grant())
	if err != nil {
		t.Fatal(err)
	}
	if d := resp.GetDecision(); d.GetEffect() != hold || d.GetMode() != "audit" || d.GetWouldEffect() != guardv1.Effect_EFFECT_DENY {
		t.Fatalf("relaxed allowlist: %v", d)
	}
	// channels.register from a human with no pending registration: a
	// structural deny, never relaxed.
	resp, err = op.Guard.Decide(ctx, &guardv1.DecideRequest{Action: "channels.register", Actor: w.actor("human:telegram:nobody"),
		Payload: w.payload(map[string]any{"messaging_group_id": "mg-none"})})
	if err != nil {
		t.Fatal(err)
	}
	if d := resp.GetDecision(); d.GetEffect() != guardv1.Effect_EFFECT_DENY || d.GetMode() != "" {
		t.Fatalf("structural deny under audit: %v", d)
	}
}

func TestActionSettingsAreValidatedAndGuarded(t *testing.T) {
	srv := testserver.Start(t)
	op := srv.Operator(t)
	w := newWorld(t, srv)
	for _, req := range []*guardv1.SetActionSettingsRequest{
		{Action: "no.such"},
		{Action: "a2a.send", Approvals: 11},
		{Action: "a2a.send", Approvals: -1},
		{Action: "a2a.send", Mode: guardv1.EnforcementMode(42)},
	} {
		if _, err := op.Registry.SetActionSettings(ctx, req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%v: %v, want InvalidArgument", req, err)
		}
	}
	set, err := op.Registry.SetActionSettings(ctx, &guardv1.SetActionSettingsRequest{Action: "agents.create", Approvals: 2,
		Mode: guardv1.EnforcementMode_ENFORCEMENT_MODE_AUDIT})
	if err != nil || set.GetEntry().GetApprovals() != 2 || set.GetEntry().GetMode() != guardv1.EnforcementMode_ENFORCEMENT_MODE_AUDIT {
		t.Fatalf("set: %v %v", set, err)
	}
	cat, err := op.Registry.ListCatalog(ctx, &guardv1.ListCatalogRequest{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range cat.GetEntries() {
		if e.GetAction() == "agents.create" {
			found = e.GetApprovals() == 2 && e.GetMode() == guardv1.EnforcementMode_ENFORCEMENT_MODE_AUDIT
		}
	}
	if !found {
		t.Fatal("catalog list does not show the settings")
	}
	// A change of mode is an admin command like any other: an agent under
	// cli_scope group is refused (the catalog is not its resource).
	agent := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "runner", w.R, ""), w.SA))
	_, err = agent.Registry.SetActionSettings(ctx, &guardv1.SetActionSettingsRequest{Action: "a2a.send",
		Mode: guardv1.EnforcementMode_ENFORCEMENT_MODE_AUDIT})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("agent changing a mode: %v, want PermissionDenied", err)
	}
	if w.count(`SELECT count(*) FROM action_settings WHERE action = 'a2a.send'`) != 0 {
		t.Fatal("the agent's mode change was applied")
	}
}

// ncl explain and the decision page say why a mode let the action run.
func TestExplainSaysAModeRelaxedTheGate(t *testing.T) {
	srv := testserver.Start(t)
	op := srv.Operator(t)
	w := a2aWorld(t, srv)
	w.exec(`UPDATE agent_message_policies SET mode = 'audit' WHERE from_agent_group_id = '{A}'`)
	resp, err := op.Guard.Decide(ctx, a2aSend(w, true))
	if err != nil {
		t.Fatal(err)
	}
	x := resp.GetExplanation()
	if !strings.Contains(x.GetSummary(), "audit mode") || !strings.Contains(x.GetSummary(), "enforce would hold") {
		t.Fatalf("summary %q", x.GetSummary())
	}
	var sawPolicy, sawMode bool
	for _, c := range x.GetChecks() {
		sawMode = sawMode || c.GetName() == "mode"
		sawPolicy = sawPolicy || strings.Contains(c.GetDetail(), "policy")
	}
	if !sawMode || !sawPolicy {
		t.Fatalf("checks %v: want the policy check and the mode", x.GetChecks())
	}
}
