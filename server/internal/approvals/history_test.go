package approvals_test

import (
	"context"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// Approvals.Get answers what the console's hold page shows, through the
// backend and its read scoping: whether the caller may resolve the hold,
// and with history its events and the decisions that named it.
func TestGetAnswersWhoMayResolveAndTheHistory(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t)
	seed(t, srv)
	ctx := context.Background()
	h := createOn(t, srv, approvals.CreateRequest{Kind: "test_history", SessionID: "sess-1", Rule: adminsOf("ag-1", ""), Title: "history"})
	// The decision that held it and a replay that used it; another hold's.
	exec(t, srv.Pool, `INSERT INTO decisions (id, at, action, actor, actor_kind, effect, hold_id, grant_id) VALUES
		('dec_held', now() - interval '2 minutes', 'a2a.send', '{}', 'agent', 'hold', $1, ''),
		('dec_used', now() - interval '1 minute', 'a2a.send', '{}', 'agent', 'allow', '', $1),
		('dec_other', now(), 'a2a.send', '{}', 'agent', 'hold', 'hold_other', '')`, h.GetId())

	get := func(c testserver.Clients, history bool) *guardv1.GetResponse {
		t.Helper()
		r, err := c.Approvals.Get(ctx, &guardv1.GetRequest{Id: h.GetId(), History: history})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	admin := userClients(t, srv, scopedAdmin)
	r := get(admin, false)
	if !r.GetMayResolve() || len(r.GetEvents()) != 0 || len(r.GetDecisionIds()) != 0 {
		t.Fatalf("without history: may_resolve %v, events %v, decisions %v; want may_resolve alone", r.GetMayResolve(), r.GetEvents(), r.GetDecisionIds())
	}
	r = get(admin, true)
	if !slices.Equal(r.GetDecisionIds(), []string{"dec_held", "dec_used"}) {
		t.Fatalf("decisions %v, want the one that held it and the replay that used it, oldest first", r.GetDecisionIds())
	}
	if got := eventWords(r.GetEvents()); !slices.Equal(got, []string{"requested"}) {
		t.Fatalf("events %v, want requested", got)
	}
	// The operator sees it and is no user: nobody it may resolve it as.
	if r := get(srv.Operator(t), true); r.GetMayResolve() || len(r.GetEvents()) != 1 {
		t.Fatalf("operator: may_resolve %v, %d events", r.GetMayResolve(), len(r.GetEvents()))
	}
	// Another group's admin may not see it: no history either.
	if _, err := userClients(t, srv, otherAdmin).Approvals.Get(ctx, &guardv1.GetRequest{Id: h.GetId(), History: true}); code(err) != codes.NotFound {
		t.Fatalf("another group's admin: want NotFound, got %v", err)
	}

	if _, err := admin.Approvals.Resolve(ctx, &guardv1.ResolveRequest{Id: h.GetId(), Outcome: guardv1.Outcome_OUTCOME_REJECT, Reason: "no"}); err != nil {
		t.Fatal(err)
	}
	r = get(admin, true)
	if got := eventWords(r.GetEvents()); !slices.Equal(got, []string{"requested", "resolved reject by " + scopedAdmin}) {
		t.Fatalf("events after the reject: %v", got)
	}
	if !r.GetMayResolve() {
		t.Fatal("may_resolve is the rule's answer, whatever the status: the admin still may")
	}
}

func eventWords(evs []*guardv1.HoldEvent) []string {
	var out []string
	for _, e := range evs {
		w := enumword.String(e.GetType())
		if e.GetOutcome() != guardv1.Outcome_OUTCOME_UNSPECIFIED {
			w += " " + enumword.String(e.GetOutcome()) + " by " + e.GetResolver()
		}
		if e.GetAt() == nil {
			w += " (no time)"
		}
		out = append(out, w)
	}
	return out
}
