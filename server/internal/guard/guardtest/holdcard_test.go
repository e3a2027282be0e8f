package guardtest

import (
	"strings"
	"testing"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// A HOLD with a card: its hold made once, deduplicated, or a deny that says
// why when nobody could approve it.

func TestHoldWithCardCreatesOnceAndDedups(t *testing.T) {
	srv := testserver.Start(t)
	op := srv.Operator(t)
	w := newWorld(t, srv)
	withOwner(w)
	// A caller-chosen kind is ignored: the hold's kind is the entry's
	// approval action, so its approval cannot grant another action.
	card := &guardv1.HoldCard{Title: "New agent", Question: "Create Scout?", DedupKey: w.sub("create:{A}:Scout"), Kind: "install_packages"}

	first, err := op.Guard.Decide(ctx, agentCreate(w, card))
	if err != nil {
		t.Fatal(err)
	}
	if first.GetDecision().GetEffect() != hold || first.GetHoldId() == "" || !first.GetHoldCreated() || first.GetHoldError() != "" {
		t.Fatalf("first: %v", first)
	}
	if n := w.count(`SELECT count(*) FROM holds WHERE id = '` + first.GetHoldId() + `' AND kind = 'create_agent' AND session_id = '{SA}'
		AND agent_group_id = '{A}' AND status = 'pending' AND catalog_action = 'agents.create'`); n != 1 {
		t.Fatalf("hold row not as expected (%d)", n)
	}
	if n := w.count(`SELECT count(*) FROM decisions WHERE id = '` + first.GetDecisionId() + `' AND hold_id = '` + first.GetHoldId() + `'`); n != 1 {
		t.Fatal("decision log row does not name the hold")
	}
	second, err := op.Guard.Decide(ctx, agentCreate(w, card))
	if err != nil {
		t.Fatal(err)
	}
	if second.GetHoldId() != first.GetHoldId() || second.GetHoldCreated() {
		t.Fatalf("dedup: %v, want hold %s not created", second, first.GetHoldId())
	}
	if n := w.count(`SELECT count(*) FROM holds WHERE session_id = '{SA}'`); n != 1 {
		t.Fatalf("%d holds, want 1", n)
	}
}

// Issue 41 item 4: a gate that holds when nobody may approve makes no hold,
// and the answer, the decision log and the dry run (ncl explain) all say
// what the agent was told: a deny, naming why and the fix — never a HOLD
// with no hold behind it, which an auditor takes for one pending.
func TestAHoldNobodyCanApproveIsADenyEverywhere(t *testing.T) {
	srv := testserver.Start(t) // a fresh database: no owner, no admin anywhere
	w := newWorld(t, srv)
	op := srv.Operator(t)
	resp, err := op.Guard.Decide(ctx, agentCreate(w, &guardv1.HoldCard{Title: "x"}))
	if err != nil {
		t.Fatal(err)
	}
	d := resp.GetDecision()
	if d.GetEffect() != guardv1.Effect_EFFECT_DENY || d.GetDecidedBy() != guard.ByNoApprover || resp.GetHoldId() != "" ||
		!strings.Contains(d.GetReason(), "no hold was made") || !strings.Contains(d.GetReason(), "fix: ncl roles grant") {
		t.Fatalf("want a DENY naming why no hold was made and the fix: %v", resp)
	}
	if n := w.count(`SELECT count(*) FROM holds`); n != 0 {
		t.Fatalf("%d holds created", n)
	}
	logged, err := op.Registry.GetDecision(ctx, &guardv1.GetDecisionRequest{Id: resp.GetDecisionId()})
	if err != nil {
		t.Fatal(err)
	}
	if got := logged.GetDecision(); got.GetEffect() != guardv1.Effect_EFFECT_DENY || got.GetReason() != d.GetReason() || got.GetHoldId() != "" {
		t.Fatalf("the log records %v, want the deny the agent was told", got)
	}
	if !explainsNoHold(logged.GetDecision().GetExplanation()) {
		t.Errorf("ncl decisions get explains %v: want the approvers check and its fix", logged.GetDecision().GetExplanation())
	}
	dry := agentCreate(w, nil)
	dry.DryRun = true
	x, err := op.Guard.Decide(ctx, dry)
	if err != nil {
		t.Fatal(err)
	}
	if x.GetDecision().GetEffect() != guardv1.Effect_EFFECT_DENY || !explainsNoHold(x.GetExplanation()) {
		t.Fatalf("ncl explain answers %v: want the deny the decision gives", x)
	}
}

// The README's own quorum line with one eligible approver: the same deny,
// naming the setting the quorum comes from.
func TestAQuorumNobodyCanMeetIsADenyEverywhere(t *testing.T) {
	srv := testserver.Start(t)
	w := newWorld(t, srv)
	withOwner(w)
	w.exec(`INSERT INTO action_settings (action, approvals) VALUES ('agents.create', 2)`)
	op := srv.Operator(t)
	resp, err := op.Guard.Decide(ctx, agentCreate(w, &guardv1.HoldCard{Title: "x"}))
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.GetDecision().GetReason(); resp.GetDecision().GetEffect() != guardv1.Effect_EFFECT_DENY ||
		!strings.Contains(r, "needs 2 distinct approvals") || !strings.Contains(r, "ncl catalog set --action agents.create --approvals") {
		t.Fatalf("want a DENY naming the quorum's setting: %v", resp)
	}
	if n := w.count(`SELECT count(*) FROM holds`); n != 0 {
		t.Fatalf("%d holds created", n)
	}
	dry := agentCreate(w, nil)
	dry.DryRun = true
	if x, err := op.Guard.Decide(ctx, dry); err != nil || x.GetDecision().GetEffect() != guardv1.Effect_EFFECT_DENY || !explainsNoHold(x.GetExplanation(), "ncl catalog set") {
		t.Fatalf("ncl explain answers %v %v: want the deny the decision gives", x, err)
	}
}

func explainsNoHold(x *guardv1.Explanation, fix ...string) bool {
	if len(fix) == 0 {
		fix = []string{"ncl roles grant"}
	}
	for _, c := range x.GetChecks() {
		if c.GetName() == "approvers" && c.GetOutcome() == "deny" {
			return len(x.GetWouldChange()) > 0 && strings.Contains(x.GetWouldChange()[0], fix[0])
		}
	}
	return false
}
