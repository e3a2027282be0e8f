package approvals_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/testserver"
	"github.com/clawguard/clawguard/server/internal/wake"
	"github.com/clawguard/clawguard/server/internal/wake/waketest"
)

// Issue 48: a click commits without notifying (its transaction begins with
// wake.KeyedTx) and still wakes the hold-event readers and the runner its
// replay push is for, once Resolve has committed: no wake-up is lost.
func TestAClickWakesItsRunnerAndTheWatchers(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t)
	seed(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l := waketest.Listen(ctx, t, srv.Pool)
	payload, _ := structpb.NewStruct(map[string]any{"apt": []any{"curl"}})
	var res approvals.CreateResult
	err := pgx.BeginFunc(ctx, srv.Pool, func(tx pgx.Tx) (err error) {
		res, err = srv.Deps().Approvals.CreateHoldTx(ctx, tx, approvals.CreateRequest{Kind: "install_packages", SessionID: "sess-1",
			Title: "install curl", DedupKey: "wake", CatalogAction: "self_mod.install_packages",
			DeliveryAction: "install_packages", Payload: payload})
		return err
	})
	if err != nil || !res.Created {
		t.Fatalf("create: %v %+v", err, res)
	}
	l.Until(ctx, t, srv.Pool) // the creation's own (a plain transaction: its trigger notified)

	admin := userClients(t, srv, scopedAdmin)
	if _, err := admin.Approvals.Resolve(ctx, &guardv1.ResolveRequest{Id: res.Hold.GetId(), Outcome: guardv1.Outcome_OUTCOME_APPROVE}); err != nil {
		t.Fatal(err)
	}
	got := l.Until(ctx, t, srv.Pool)
	for _, want := range []string{wake.HoldEventsChannel + ":", wake.RunnerPushesChannel + ":r1"} {
		if !slices.Contains(got, want) {
			t.Errorf("after the click: %v, missing %s", got, want)
		}
	}
	if r := lastPush(t, srv, "replay").GetReplay(); r.GetHoldId() != res.Hold.GetId() {
		t.Fatalf("the replay push is for %q, want %q", r.GetHoldId(), res.Hold.GetId())
	}
}
