package api_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Issue 32: owners freeze from chat. A bridge freezes only as a user of its
// own namespaces, and the guard decides for that user: the telegram owner's
// freeze is the owner's; a scoped admin's freeze of every agent, a
// stranger's, another namespace's user's or a user token naming someone
// else are refused, and nothing is frozen by them; no bridge lifts a freeze.
func TestAttackBridgeFreezesOnlyAsItsUserAndOnlyWhatTheUserMay(t *testing.T) {
	w := newBridgeWorld(t)
	ctx := context.Background()
	all := func(as string) *guardv1.FreezeRequest {
		return &guardv1.FreezeRequest{Scope: guardv1.FreezeScope_FREEZE_SCOPE_ALL, Reason: "from chat", AsUser: as}
	}
	frozen := func() int {
		t.Helper()
		var n int
		if err := w.srv.Pool.QueryRow(ctx, `SELECT count(*) FROM freezes`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	_, err := w.slack.Registry.Freeze(ctx, all("telegram:olivia"))
	wantDenied(t, "slack bridge freezing as the telegram owner", err)
	_, err = w.legacy.Registry.Freeze(ctx, all("telegram:olivia"))
	wantDenied(t, "a bridge token without channels freezing as the owner", err)
	_, err = w.slack.Registry.Freeze(ctx, all("slack:sam"))
	wantDenied(t, "slack bridge freezing every agent as a scoped admin", err)
	_, err = w.telegram.Registry.Freeze(ctx, all("telegram:stranger"))
	wantDenied(t, "telegram bridge freezing as a user with no role", err)
	_, err = w.user.Registry.Freeze(ctx, all("telegram:olivia"))
	wantDenied(t, "user token freezing as another user", err)
	if _, err := w.telegram.Registry.Freeze(ctx, all("")); status.Code(err) != codes.InvalidArgument {
		t.Errorf("bridge freezing without as_user: %v, want InvalidArgument", err)
	}
	if _, err := w.telegram.Registry.ListFreezes(ctx, &guardv1.ListFreezesRequest{AsUser: "slack:sam"}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("telegram bridge listing freezes as a slack user: %v, want PermissionDenied", err)
	}
	if n := frozen(); n != 0 {
		t.Fatalf("%d freezes after refused attempts, want 0", n)
	}

	// The group's admin freezes the group, from Slack; the owner every agent, from Telegram.
	if _, err := w.slack.Registry.Freeze(ctx, &guardv1.FreezeRequest{Scope: guardv1.FreezeScope_FREEZE_SCOPE_GROUP, Group: "g1", AsUser: "slack:sam"}); err != nil {
		t.Fatalf("slack bridge freezing g1 as its admin: %v", err)
	}
	got, err := w.telegram.Registry.Freeze(ctx, all("telegram:olivia"))
	if err != nil {
		t.Fatalf("telegram bridge freezing every agent as the owner: %v", err)
	}
	if got.GetFreeze().GetFrozenBy() != "telegram:olivia" {
		t.Errorf("frozen_by = %q, want the owner who asked in chat", got.GetFreeze().GetFrozenBy())
	}
	l, err := w.telegram.Registry.ListFreezes(ctx, &guardv1.ListFreezesRequest{AsUser: "telegram:olivia"})
	if err != nil || len(l.GetFreezes()) != 2 {
		t.Fatalf("list as the owner: %v %v, want 2 freezes", l, err)
	}
	// The decision log names the chat user as the actor, not the bridge.
	var human int
	if err := w.srv.Pool.QueryRow(ctx, `SELECT count(*) FROM decisions WHERE action = 'freezes.set' AND effect = 'allow' AND actor->'human'->>'user_id' = 'telegram:olivia'`).Scan(&human); err != nil {
		t.Fatal(err)
	}
	if human != 1 {
		t.Errorf("%d logged allows of freezes.set by human telegram:olivia, want 1", human)
	}
	// Lifting a freeze is not a chat message's to do: bridges may not call Unfreeze at all.
	_, err = w.telegram.Registry.Unfreeze(ctx, &guardv1.UnfreezeRequest{Scope: guardv1.FreezeScope_FREEZE_SCOPE_ALL})
	wantDenied(t, "telegram bridge unfreezing every agent", err)
	if n := frozen(); n != 2 {
		t.Fatalf("%d freezes after a bridge's unfreeze, want both still", n)
	}
}
