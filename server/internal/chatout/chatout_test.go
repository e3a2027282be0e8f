package chatout_test

import (
	"context"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/clawguard/clawguard/migrations/pgtest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func exec(t *testing.T, srv *testserver.Server, sql string, args ...any) {
	t.Helper()
	if _, err := srv.Pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// An agent's reply reaches its chat's bridge in order, resumable by cursor;
// only the runner hosting the session speaks for it, and only into its chat.
func TestAgentRepliesReachTheirChatsBridge(t *testing.T) {
	srv := testserver.Start(t)
	exec(t, srv, `INSERT INTO runners (id, lease_expires_at) VALUES ('r1', now() + interval '1 hour'), ('r2', now() + interval '1 hour')`)
	exec(t, srv, `INSERT INTO agent_groups (id, name) VALUES ('ag1', 'research')`)
	exec(t, srv, `INSERT INTO messaging_groups (id, channel_type, platform_id) VALUES ('mg1', 'telegram', '-100'), ('mg2', 'slack', 'C1')`)
	exec(t, srv, `INSERT INTO sessions (id, agent_group_id, messaging_group_id, runner_id) VALUES
		('s1', 'ag1', 'mg1', 'r1'), ('s2', 'ag1', 'mg2', 'r1'), ('s3', 'ag1', NULL, 'r1')`)

	asAgent := func(session string) guardv1.RegistryClient {
		return testserver.ClientsFor(srv.Conn(t, srv.Token(t, "runner", "r1", ""), session)).Registry
	}
	ctx := context.Background()
	for _, text := range []string{"first", "second"} {
		if _, err := asAgent("s1").PostChatMessage(ctx, &guardv1.PostChatMessageRequest{Text: text}); err != nil {
			t.Fatalf("PostChatMessage %q: %v", text, err)
		}
	}
	if _, err := asAgent("s2").PostChatMessage(ctx, &guardv1.PostChatMessageRequest{Text: "for slack"}); err != nil {
		t.Fatal(err)
	}
	if _, err := asAgent("s3").PostChatMessage(ctx, &guardv1.PostChatMessageRequest{Text: "x"}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("a session without a chat: %v, want FailedPrecondition", err)
	}
	if _, err := asAgent("s1").PostChatMessage(ctx, &guardv1.PostChatMessageRequest{Text: "a\x00b"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a NUL byte: %v, want InvalidArgument", err)
	}
	// Another runner cannot speak for s1.
	other := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "runner", "r2", ""), "")).Registry
	if _, err := other.PostChatMessage(ctx, &guardv1.PostChatMessageRequest{SessionId: "s1", Text: "forged"}); status.Code(err) == codes.OK {
		t.Fatal("a runner not hosting s1 posted into its chat")
	}

	bridge := testserver.ClientsFor(srv.Conn(t, srv.BridgeToken(t, "telegram"), "")).Registry
	read := func(after int64, n int) []*guardv1.WatchChatOutboxResponse {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		st, err := bridge.WatchChatOutbox(cctx, &guardv1.WatchChatOutboxRequest{ChannelType: "telegram", AfterCursor: after})
		if err != nil {
			t.Fatal(err)
		}
		var got []*guardv1.WatchChatOutboxResponse
		for len(got) < n {
			m, err := st.Recv()
			if err != nil {
				t.Fatalf("after %d messages: %v", len(got), err)
			}
			got = append(got, m)
		}
		return got
	}
	got := read(0, 2)
	if got[0].GetText() != "first" || got[1].GetText() != "second" || got[0].GetPlatformId() != "-100" ||
		got[0].GetKind() != guardv1.ChatMessageKind_CHAT_MESSAGE_KIND_REPLY || got[1].GetCursor() <= got[0].GetCursor() {
		t.Fatalf("telegram outbox %v, want first then second for chat -100", got)
	}
	// Resuming after the first message gives the second, never the slack one.
	again := read(got[0].GetCursor(), 1)
	if again[0].GetText() != "second" {
		t.Fatalf("resumed at %q, want second", again[0].GetText())
	}
}
