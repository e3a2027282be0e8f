package api

import (
	"context"
	"log/slog"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/authn"
	"github.com/clawguard/clawguard/server/internal/guard"
)

// Bridges speak for their channel namespaces only (the token's channels,
// set by the operator): they assert users of those namespaces, route chats
// of those channels, and click only as such a user. A bridge token without
// channels (minted before bindings existed) speaks for nobody. Every
// refusal is logged at info: a bridge overstepping is either misconfigured
// or leaked.

// bridgeMaySpeak refuses a bridge token that speaks for no channel.
func bridgeMaySpeak(ctx context.Context, log *slog.Logger, c authn.Caller) error {
	if len(c.Principal.Channels) > 0 {
		return nil
	}
	log.InfoContext(ctx, "bridge refused: its token speaks for no channel", "token", c.Principal.TokenID)
	return status.Error(codes.PermissionDenied,
		"this bridge token speaks for no channel: recreate it with ncl tokens create --kind bridge --channel <namespace>")
}

// bridgeAsserts refuses a bridge asserting a user outside its namespaces.
func bridgeAsserts(ctx context.Context, log *slog.Logger, c authn.Caller, field, userID string) error {
	if err := bridgeMaySpeak(ctx, log, c); err != nil {
		return err
	}
	if c.Principal.SpeaksFor(userID) {
		return nil
	}
	log.InfoContext(ctx, "bridge refused: user outside its channel namespaces",
		"token", c.Principal.TokenID, "field", field, "user", userID, "channels", c.Principal.Channels)
	return status.Errorf(codes.PermissionDenied, "%s: this bridge speaks for %v, not for %q", field, c.Principal.Channels, userID)
}

// bridgeRoutes refuses a bridge routing a chat of another channel, or a
// sender who is not a user of that chat's channel.
func bridgeRoutes(ctx context.Context, log *slog.Logger, c authn.Caller, channel, sender string) error {
	if err := bridgeMaySpeak(ctx, log, c); err != nil {
		return err
	}
	if !c.Principal.SpeaksForChannel(channel) {
		log.InfoContext(ctx, "bridge refused: chat of another channel", "token", c.Principal.TokenID, "channel", channel, "channels", c.Principal.Channels)
		return status.Errorf(codes.PermissionDenied, "channel_type: this bridge speaks for %v, not %q", c.Principal.Channels, channel)
	}
	if sender != "" && authn.Namespace(sender) != channel {
		log.InfoContext(ctx, "bridge refused: sender of another namespace", "token", c.Principal.TokenID, "channel", channel, "sender", sender)
		return status.Errorf(codes.PermissionDenied, "sender_user_id: %q is not a user of channel %q", sender, channel)
	}
	return nil
}

func isBridge(c authn.Caller) bool { return c.Principal.Kind == guardv1.Principal_PRINCIPAL_BRIDGE }

// bridgeDecides keeps a bridge's question inside its channels: the human
// it asserts is a user of its namespaces, and every chat the decision
// would read (guard.Entry.Names, wherever the request names it) is one of
// its channels'. A chat of another channel and one that does not exist
// are refused in the same words: the answer is no oracle of other
// channels' chats.
func (s *GuardService) bridgeDecides(ctx context.Context, c authn.Caller, req *guardv1.DecideRequest, r *guard.Request) error {
	if h := req.GetActor().GetHuman(); h != nil {
		if err := bridgeAsserts(ctx, s.d.Log, c, "actor.human.user_id", h.GetUserId()); err != nil {
			return err
		}
	} else if err := bridgeMaySpeak(ctx, s.d.Log, c); err != nil {
		return err
	}
	refs, err := s.namedObjects(r)
	if err != nil {
		return err
	}
	for _, ref := range refs {
		if ref.Kind != guard.RefChat {
			continue // a bridge speaks for its channels' chats, whatever group they are wired to
		}
		mg := ref.ID
		channel, found, err := s.d.Reads.ChatChannel(ctx, mg)
		if err != nil {
			return err
		}
		if !found || !c.Principal.SpeaksForChannel(channel) {
			s.d.Log.InfoContext(ctx, "bridge refused: decision about a chat that is not of its channels",
				"token", c.Principal.TokenID, "messaging_group", mg, "channel", channel, "channels", c.Principal.Channels)
			return status.Errorf(codes.PermissionDenied, "messaging group %q is not a chat of this bridge's channels %v", mg, c.Principal.Channels)
		}
	}
	return nil
}
