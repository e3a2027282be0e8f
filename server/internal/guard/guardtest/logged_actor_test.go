package guardtest

import (
	"testing"

	"google.golang.org/protobuf/proto"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// TestLoggedActorsReadBackWhole: the log stores an actor only when its row
// does not imply it (a human's user id); an agent's, the host's and the
// system's are left NULL and rebuilt from the row by every reader, so
// GetDecision and ListDecisions show each decision's actor as it asked.
func TestLoggedActorsReadBackWhole(t *testing.T) {
	srv := testserver.Start(t)
	w := newWorld(t, srv)
	op := srv.Operator(t)
	for _, c := range []struct {
		actor  string
		stored bool
	}{
		{"agent:{A}:{SA}", false},
		{"agent:{A}", false},
		{"host", false},
		{"system", false},
		{"human:telegram:dana", true},
	} {
		actor := w.actor(c.actor)
		resp, err := op.Guard.Decide(ctx, &guardv1.DecideRequest{Action: "a2a.send", Actor: actor, Resource: map[string]string{"to": w.B}})
		if err != nil {
			t.Fatalf("%s: %v", c.actor, err)
		}
		id := resp.GetDecisionId()
		if stored := w.count(`SELECT count(*) FROM decisions WHERE id = '`+id+`' AND actor IS NOT NULL`) == 1; stored != c.stored {
			t.Errorf("%s: actor stored = %v, want %v", c.actor, stored, c.stored)
		}
		got, err := op.Registry.GetDecision(ctx, &guardv1.GetDecisionRequest{Id: id})
		if err != nil {
			t.Fatalf("%s: GetDecision: %v", c.actor, err)
		}
		if !proto.Equal(got.GetDecision().GetActor(), actor) {
			t.Errorf("%s: GetDecision's actor %v, want %v", c.actor, got.GetDecision().GetActor(), actor)
		}
		list, err := op.Registry.ListDecisions(ctx, &guardv1.ListDecisionsRequest{Action: "a2a.send", Limit: 1})
		if err != nil || len(list.GetDecisions()) != 1 || list.GetDecisions()[0].GetId() != id {
			t.Fatalf("%s: ListDecisions: %v %v", c.actor, list, err)
		}
		if !proto.Equal(list.GetDecisions()[0].GetActor(), actor) {
			t.Errorf("%s: ListDecisions' actor %v, want %v", c.actor, list.GetDecisions()[0].GetActor(), actor)
		}
	}
}
