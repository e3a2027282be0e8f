package approvals_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/telemetry"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// Issue 33: a hold keeps the trace context of the request that created it,
// and its replay push carries that context to the runner; a hold created
// outside any trace keeps none.
func TestHoldKeepsTraceContextForItsReplay(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t)
	seed(t, srv)
	admin := userClients(t, srv, scopedAdmin)
	payload, _ := structpb.NewStruct(map[string]any{"apt": []any{"curl"}})
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, c := range []struct {
		name, traceparent string
	}{{"traced", tp}, {"untraced", ""}} {
		ctx := telemetry.WithRemoteParent(context.Background(), c.traceparent)
		var res approvals.CreateResult
		err := pgx.BeginFunc(ctx, srv.Pool, func(tx pgx.Tx) (err error) {
			res, err = srv.Deps().Approvals.CreateHoldTx(ctx, tx, approvals.CreateRequest{Kind: "install_packages", SessionID: "sess-1",
				Title: "install curl " + c.name, DedupKey: c.name, CatalogAction: "self_mod.install_packages",
				DeliveryAction: "install_packages", Payload: payload})
			return err
		})
		if err != nil || !res.Created {
			t.Fatalf("%s: create: %v %+v", c.name, err, res)
		}
		var stored string
		if err := srv.Pool.QueryRow(ctx, `SELECT trace_parent FROM holds WHERE id = $1`, res.Hold.GetId()).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if stored != c.traceparent {
			t.Fatalf("%s: hold keeps trace_parent %q, want %q", c.name, stored, c.traceparent)
		}
		if _, err := admin.Approvals.Resolve(context.Background(), &guardv1.ResolveRequest{Id: res.Hold.GetId(), Outcome: guardv1.Outcome_OUTCOME_APPROVE}); err != nil {
			t.Fatal(err)
		}
		r := lastPush(t, srv, "replay").GetReplay()
		if r.GetHoldId() != res.Hold.GetId() || r.GetTraceparent() != c.traceparent {
			t.Fatalf("%s: replay push %v, want traceparent %q", c.name, r, c.traceparent)
		}
		// The approver's call was not traced (the test server exports nothing).
		if r.GetApprovalTraceparent() != "" {
			t.Fatalf("%s: approval traceparent %q from an untraced call", c.name, r.GetApprovalTraceparent())
		}
	}
}
