package approvals_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// BenchmarkApprovalRoundTrip is the approval round trip of SPEC §10 over
// real gRPC on one replica: an agent's install_packages decision HOLDs and
// creates its hold (Guard.Decide by the runner) → the owner approves
// (Approvals.Resolve, which commits the ReplayAction push with the
// resolution) → the owning runner receives the push on its Connect stream
// and acks it → it replays through Guard.Decide with grant = hold id and
// gets ALLOW (the grant consumed). Reported: p50/p99 of the whole loop and
// of "approve → replay allowed" (the part after the human's click).
//
//	go test -run '^$' -bench ApprovalRoundTrip -benchtime 500x ./internal/approvals/
func BenchmarkApprovalRoundTrip(b *testing.B) {
	srv := testserver.Start(b)
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO agent_groups (id, name) VALUES ('ag-1', 'one')`,
		`INSERT INTO users (id) VALUES ('slack:owner')`,
		`INSERT INTO user_roles (user_id, role) VALUES ('slack:owner', 'owner')`,
	} {
		if _, err := srv.Pool.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	runner := testserver.ClientsFor(srv.Conn(b, srv.Token(b, "runner", "r1", ""), ""))
	_, err := runner.Registry.RegisterRunner(ctx, &guardv1.RegisterRunnerRequest{RunnerId: "r1", InstanceId: "bench", Host: "h", Version: "bench",
		Capabilities: []string{"process"}, DeliveryActions: []*guardv1.DeliveryActionDecl{
			{Name: "install_packages", CatalogAction: "self_mod.install_packages"}, {Name: "cli_request"}}})
	if err != nil {
		b.Fatal(err)
	}
	sess, err := runner.Registry.OpenSession(ctx, &guardv1.OpenSessionRequest{AgentGroupId: "ag-1"})
	if err != nil {
		b.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := runner.Registry.Connect(sctx)
	if err != nil {
		b.Fatal(err)
	}
	if err := stream.Send(&guardv1.ConnectRequest{Frame: &guardv1.ConnectRequest_Hello{Hello: &guardv1.ConnectHello{RunnerId: "r1", InstanceId: "bench"}}}); err != nil {
		b.Fatal(err)
	}
	replays := make(chan *guardv1.Push, 16)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				close(replays)
				return
			}
			if p := m.GetPush(); p != nil {
				_ = stream.Send(&guardv1.ConnectRequest{Frame: &guardv1.ConnectRequest_Ack{Ack: &guardv1.PushAck{PushId: p.GetId(), Ok: true}}})
				if p.GetReplay() != nil {
					replays <- p
				}
			}
		}
	}()
	owner := userClients(b, srv, "slack:owner")
	agent := &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: "ag-1", SessionId: sess.GetSession().GetId()}}}

	var whole, afterClick, resolve, push, replay []time.Duration
	b.ResetTimer()
	for i := range b.N {
		payload, _ := structpb.NewStruct(map[string]any{"apt": []any{fmt.Sprintf("pkg%d", i)}})
		t0 := time.Now()
		d, err := runner.Guard.Decide(ctx, &guardv1.DecideRequest{Action: "self_mod.install_packages", Actor: agent, Payload: payload,
			Card: &guardv1.HoldCard{Title: "install", DeliveryAction: "install_packages"}})
		if err != nil || d.GetDecision().GetEffect() != guardv1.Effect_EFFECT_HOLD || d.GetHoldId() == "" {
			b.Fatalf("decide: %v %v", d, err)
		}
		t1 := time.Now()
		if _, err := owner.Approvals.Resolve(ctx, &guardv1.ResolveRequest{Id: d.GetHoldId(), Outcome: guardv1.Outcome_OUTCOME_APPROVE}); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		var p *guardv1.Push
		select {
		case p = <-replays:
		case <-time.After(10 * time.Second):
			b.Fatal("no replay push within 10s")
		}
		if p == nil || p.GetReplay().GetHoldId() != d.GetHoldId() {
			b.Fatalf("replay push %v for hold %s", p, d.GetHoldId())
		}
		t3 := time.Now()
		r := p.GetReplay()
		a, err := runner.Guard.Decide(ctx, &guardv1.DecideRequest{Action: r.GetCatalogAction(), Actor: agent, Payload: r.GetPayload(), Grant: r.GetHoldId()})
		if err != nil || a.GetDecision().GetEffect() != guardv1.Effect_EFFECT_ALLOW {
			b.Fatalf("replay: %v %v", a, err)
		}
		now := time.Now()
		whole = append(whole, now.Sub(t0))
		afterClick = append(afterClick, now.Sub(t1))
		resolve, push, replay = append(resolve, t2.Sub(t1)), append(push, t3.Sub(t2)), append(replay, now.Sub(t3))
	}
	b.StopTimer()
	report := func(name string, d []time.Duration) {
		slices.Sort(d)
		at := func(p float64) float64 { return float64(d[int(p*float64(len(d)-1))].Microseconds()) / 1000 }
		b.ReportMetric(at(0.50), name+"-p50-ms")
		b.ReportMetric(at(0.99), name+"-p99-ms")
	}
	report("loop", whole)
	report("approve-to-allow", afterClick)
	// Where the time after the click goes.
	report("resolve", resolve)
	report("push", push)
	report("replay", replay)
}
