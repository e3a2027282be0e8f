package api_test

import (
	"context"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// Approvals.Request's dedup key must not reach the guard's holds: a live
// hold with a key is returned instead of a new one, whatever its kind, so
// a Request carrying "sender_admit:<chat>:<sender>" made the guard's
// sender admission answer with that (non-admission) hold — the admission
// card was never created and approving the decoy admitted nobody.
func TestRequestDedupKeyCannotCaptureAGuardHold(t *testing.T) {
	srv := testserver.Start(t)
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO agent_groups (id, name) VALUES ('ag-1', 'Agent')`,
		`INSERT INTO messaging_groups (id, channel_type, platform_id, name, is_group, unknown_sender_policy)
			VALUES ('mg-chat', 'telegram', 'chat-123', 'Group Chat', true, 'request_approval')`,
		`INSERT INTO messaging_group_agents (id, messaging_group_id, agent_group_id) VALUES ('mga-1', 'mg-chat', 'ag-1')`,
		`INSERT INTO users (id) VALUES ('tg:olivia')`,
		`INSERT INTO user_roles (user_id, role) VALUES ('tg:olivia', 'owner')`,
	} {
		if _, err := srv.Pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	bridge := testserver.ClientsFor(srv.Conn(t, srv.BridgeToken(t, "telegram"), ""))
	decoy, err := bridge.Approvals.Request(ctx, &guardv1.RequestRequest{Kind: "onecli_credential",
		Card: &guardv1.HoldCard{Title: "decoy", DedupKey: "sender_admit:mg-chat:telegram:stranger"}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := bridge.Registry.RouteInbound(ctx, &guardv1.RouteInboundRequest{ChannelType: "telegram", PlatformId: "chat-123", IsGroup: true,
		SenderUserId: "telegram:stranger", MessageId: "m1", Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if r.GetHoldId() == "" || r.GetHoldId() == decoy.GetHold().GetId() {
		t.Fatalf("stranger's message held on %q (decoy %s), want its own sender_admit hold", r.GetHoldId(), decoy.GetHold().GetId())
	}
	var kind string
	if err := srv.Pool.QueryRow(ctx, `SELECT kind FROM holds WHERE id = $1`, r.GetHoldId()).Scan(&kind); err != nil || kind != "sender_admit" {
		t.Fatalf("admission hold kind = %q (%v), want sender_admit", kind, err)
	}
}

// The guard path stored a card's dedup key raw too: a runner card for its
// agent's install_packages carrying "sender_admit:<chat>:<sender>" was the
// live hold the sender admission found, so the real admission card was
// never created. Keys are stored inside the server's namespace (kind,
// anchor group, session); a card can only deduplicate its own holds.
func TestRunnerCardCannotSquatTheSenderAdmissionKey(t *testing.T) {
	srv := testserver.Start(t)
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO agent_groups (id, name) VALUES ('ag-1', 'Agent')`,
		`INSERT INTO runners (id, host, lease_expires_at) VALUES ('r1', 'h', now() + interval '1 hour')`,
		`INSERT INTO sessions (id, agent_group_id, runner_id) VALUES ('s1', 'ag-1', 'r1')`,
		`INSERT INTO messaging_groups (id, channel_type, platform_id, name, is_group, unknown_sender_policy)
			VALUES ('mg-chat', 'telegram', 'chat-123', 'Group Chat', true, 'request_approval')`,
		`INSERT INTO messaging_group_agents (id, messaging_group_id, agent_group_id) VALUES ('mga-1', 'mg-chat', 'ag-1')`,
		`INSERT INTO users (id) VALUES ('tg:olivia')`,
		`INSERT INTO user_roles (user_id, role) VALUES ('tg:olivia', 'owner')`,
	} {
		if _, err := srv.Pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	runner := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "runner", "r1", ""), "s1"))
	payload, _ := structpb.NewStruct(map[string]any{"apt": []any{"curl"}})
	for _, key := range []string{"sender_admit:mg-chat:telegram:stranger", "sender_admit/ag-1//sender_admit:mg-chat:telegram:stranger"} {
		decoy, err := runner.Guard.Decide(ctx, &guardv1.DecideRequest{Action: "self_mod.install_packages", Payload: payload,
			Card: &guardv1.HoldCard{Title: "decoy", DedupKey: key}})
		if err != nil || decoy.GetHoldId() == "" {
			t.Fatalf("runner's own install hold: %v (%v)", decoy, err)
		}
	}
	bridge := testserver.ClientsFor(srv.Conn(t, srv.BridgeToken(t, "telegram"), ""))
	r, err := bridge.Registry.RouteInbound(ctx, &guardv1.RouteInboundRequest{ChannelType: "telegram", PlatformId: "chat-123", IsGroup: true,
		SenderUserId: "telegram:stranger", MessageId: "m1", Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	var kind, key string
	if err := srv.Pool.QueryRow(ctx, `SELECT kind, dedup_key FROM holds WHERE id = $1`, r.GetHoldId()).Scan(&kind, &key); err != nil || kind != "sender_admit" {
		t.Fatalf("stranger's message held on %q: kind %q (%v), want its own sender_admit hold", r.GetHoldId(), kind, err)
	}
	if want := "sender_admit/ag-1//sender_admit:mg-chat:telegram:stranger"; key != want {
		t.Fatalf("admission dedup key = %q, want %q", key, want)
	}
	var squats int
	if err := srv.Pool.QueryRow(ctx, `SELECT count(*) FROM holds WHERE kind = 'install_packages' AND dedup_key LIKE 'install_packages/ag-1/s1/%'`).Scan(&squats); err != nil || squats != 2 {
		t.Fatalf("runner cards stored in their own namespace: %d (%v), want 2", squats, err)
	}
}
