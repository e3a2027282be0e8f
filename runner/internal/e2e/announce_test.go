package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// An approved install's outcome (with its build output) is posted as a
// notice to the chat the session talks to, where the people who asked for
// and approved it are; the chat's bridge delivers it from the outbox.
func TestApprovedInstallOutcomeIsPostedToTheSessionsChat(t *testing.T) {
	s := startServer(t)
	ctx := context.Background()
	owner := s.owner(t, "telegram:olivia")
	g := s.group(t, "chatty", guardv1.CliScope_CLI_SCOPE_GROUP)
	mg, err := s.op.registry.CreateMessagingGroup(ctx, &guardv1.CreateMessagingGroupRequest{ChannelType: "telegram", PlatformId: "chat-42",
		Name: "team", UnknownSenderPolicy: guardv1.SenderPolicy_SENDER_POLICY_PUBLIC, IsGroup: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.op.registry.CreateWiring(ctx, &guardv1.CreateWiringRequest{MessagingGroup: mg.GetMessagingGroup().GetId(), Group: g}); err != nil {
		t.Fatal(err)
	}
	r := s.startRunner(t, runnerOpts{script: []any{step("install_packages", map[string]any{"apt": []any{"hello"}})}})
	var routed *guardv1.RouteInboundResponse
	waitFor(t, 30*time.Second, "the chat's message routed to a session", func() bool {
		routed, err = s.op.registry.RouteInbound(ctx, &guardv1.RouteInboundRequest{ChannelType: "telegram", PlatformId: "chat-42",
			IsGroup: true, SenderUserId: "telegram:u1", MessageId: "m1", Text: "please install hello"})
		return err == nil && routed.GetOutcome() == guardv1.RouteOutcome_ROUTE_OUTCOME_DELIVERED
	})
	sg := r.session(t, g)
	held := waitEvent(t, sg, "install_packages held", notice("HELD"))
	s.approve(t, held.s("hold_id"), owner)
	waitEvent(t, sg, "RESULT notice", notice("RESULT"))

	conn, err := pgx.Connect(ctx, s.db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var kind, text, platform string
	waitFor(t, 30*time.Second, "the outcome in the chat outbox", func() bool {
		err := conn.QueryRow(ctx, `SELECT kind, text, platform_id FROM chat_outbox WHERE session_id = $1 AND text LIKE 'install_packages%'`, sg.ID).
			Scan(&kind, &text, &platform)
		return err == nil
	})
	// Issue 45: the process runtime installs nothing, and the words say so.
	if kind != "notice" || platform != "chat-42" || !strings.Contains(text, "approved apt: hello, recorded but not installed") {
		t.Fatalf("chat outbox: kind=%s platform=%s text=%q", kind, platform, text)
	}
}
