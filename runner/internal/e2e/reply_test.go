package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// An agent's reply goes to the chat its session talks to: the runner's
// "reply" action queues it in the server's chat outbox, where the chat's
// bridge reads it. The agent cannot name another chat.
func TestAgentReplyReachesItsChatsOutbox(t *testing.T) {
	s := startServer(t)
	g := s.group(t, "talker", guardv1.CliScope_CLI_SCOPE_GROUP)
	r := s.startRunner(t, runnerOpts{groups: []string{g}})
	sn := r.session(t, g)

	ctx := context.Background()
	db, err := pgx.Connect(ctx, s.db)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	if _, err := db.Exec(ctx, `INSERT INTO messaging_groups (id, channel_type, platform_id) VALUES ('mg_chat', 'telegram', '-5'), ('mg_other', 'telegram', '-6')`); err != nil {
		t.Fatal(err)
	}
	// Before the session talks to a chat, a reply has nowhere to go.
	if got := doServed(t, sn, step("reply", map[string]any{"text": "too early"})); got.s("status") != "FAILED" || !strings.Contains(got.s("reason"), "no chat") {
		t.Fatalf("reply from a session without a chat: %v", got)
	}
	if _, err := db.Exec(ctx, `UPDATE sessions SET messaging_group_id = 'mg_chat' WHERE id = $1`, sn.ID); err != nil {
		t.Fatal(err)
	}
	if got := doServed(t, sn, step("reply", map[string]any{"text": "hello chat", "platform_id": "-6"})); got.s("status") != "DONE" {
		t.Fatalf("reply: %v", got)
	}
	if got := doServed(t, sn, step("reply", map[string]any{"text": "  "})); got.s("status") != "FAILED" {
		t.Fatalf("empty reply: %v", got)
	}

	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	stream, err := s.op.registry.WatchChatOutbox(wctx, &guardv1.WatchChatOutboxRequest{ChannelType: "telegram"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := stream.Recv()
	if err != nil {
		t.Fatalf("chat outbox: %v", err)
	}
	if m.GetText() != "hello chat" || m.GetPlatformId() != "-5" || m.GetSessionId() != sn.ID || m.GetAgentGroupId() != g {
		t.Fatalf("outbox message %v, want the reply to chat -5 (the session's, not the one the payload named)", m)
	}
}
