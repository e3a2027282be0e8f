package bridge

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// FreezeUsage is the answer to a freeze command the bridge cannot read.
const FreezeUsage = "Usage: /freeze all|group NAME|runner ID [reason] · /freezes (lift a freeze in the console or with ncl unfreeze)"

// chatCommand is a freeze command typed in a DM with the bot (issue 32):
// the owner who sees an agent misbehave stops it from where they are.
type chatCommand struct {
	verb   string // "freeze", "unfreeze" or "freezes"
	scope  guardv1.FreezeScope
	target string // the group (name or id) or the runner
	reason string
	bad    bool // a freeze command, but not one the bridge can read
}

// parseChatCommand reads "/freeze all [reason]", "/freeze group NAME
// [reason]", "/freeze runner ID [reason]", "/unfreeze …" and "/freezes"
// (Telegram may append "@botname" to the command). ok is false for any
// other text, which is routed to the agent as before.
func parseChatCommand(text string) (c chatCommand, ok bool) {
	fields := strings.Fields(text)
	if len(fields) == 0 || !strings.HasPrefix(fields[0], "/") {
		return c, false
	}
	verb, _, _ := strings.Cut(strings.ToLower(fields[0][1:]), "@")
	switch verb {
	case "freezes":
		return chatCommand{verb: verb}, true
	case "freeze", "unfreeze":
	default:
		return c, false
	}
	c = chatCommand{verb: verb}
	args := fields[1:]
	if len(args) == 0 {
		c.bad = true
		return c, true
	}
	switch strings.ToLower(args[0]) {
	case "all":
		c.scope, args = guardv1.FreezeScope_FREEZE_SCOPE_ALL, args[1:]
	case "group", "runner":
		if len(args) < 2 {
			c.bad = true
			return c, true
		}
		c.scope = guardv1.FreezeScope_FREEZE_SCOPE_GROUP
		if strings.EqualFold(args[0], "runner") {
			c.scope = guardv1.FreezeScope_FREEZE_SCOPE_RUNNER
		}
		c.target, args = args[1], args[2:]
	default:
		c.bad = true
		return c, true
	}
	if verb == "unfreeze" && len(args) > 0 {
		c.bad = true // an unfreeze takes no reason: a typo must not lift a freeze it did not name
	}
	c.reason = strings.Join(args, " ")
	return c, true
}

// what names a command's scope for the answer.
func (c chatCommand) what() string {
	switch c.scope {
	case guardv1.FreezeScope_FREEZE_SCOPE_ALL:
		return "every agent"
	case guardv1.FreezeScope_FREEZE_SCOPE_GROUP:
		return "group " + c.target
	}
	return "runner " + c.target
}

// runChatCommand runs a freeze command as its sender: the server decides
// for that user (an owner freezes anything, a group's admins their group,
// anyone else is refused) and logs it as theirs. A refusal is answered in
// the chat; an error worth retrying goes back to the caller's retry (a
// freeze or unfreeze asked twice is the same one).
func (b *Bridge) runChatCommand(ctx context.Context, m Message, c chatCommand) error {
	as := b.UserID(m.Sender)
	var answer string
	var err error
	switch {
	case c.bad:
		answer = FreezeUsage
	case c.verb == "freezes":
		var resp *guardv1.ListFreezesResponse
		if resp, err = b.rgy.ListFreezes(ctx, &guardv1.ListFreezesRequest{AsUser: as}); err == nil {
			answer = freezeList(resp.GetFreezes())
		}
	case c.verb == "freeze":
		req := &guardv1.FreezeRequest{Scope: c.scope, Reason: c.reason, AsUser: as}
		req.Group, req.Runner = c.targets()
		if _, err = b.rgy.Freeze(ctx, req); err == nil {
			answer = "🧊 Frozen: " + c.what() + ". Its decisions deny from now on and its running agents are stopped; pending holds stay pending. Lift it in the console or with ncl unfreeze " + c.ncl() + "."
		}
	default:
		// Lifting a freeze is not a chat message's to do (a compromised
		// bridge could send it): the server refuses bridges Unfreeze.
		answer = "Lift a freeze in the console (Freezes) or with: ncl unfreeze " + c.ncl()
	}
	if err != nil {
		if b.Transient(err) {
			return fmt.Errorf("%s: %w", c.verb, err)
		}
		b.m.Errors.WithLabelValues("command").Inc()
		b.log.Info("chat command refused", "command", c.verb, "user", as, "err", err)
		answer = "⚠️ Not done: " + status.Convert(err).Message()
	} else if !c.bad {
		b.log.Info("chat command done", "audit", true, "command", c.verb, "scope", c.what(), "user", as)
	}
	if _, err := b.chat.Post(ctx, m.Chat, answer, nil); err != nil {
		b.m.Errors.WithLabelValues("send").Inc()
		b.log.Warn("answering a chat command failed", "chat", m.Chat, "err", err)
		return nil
	}
	b.m.MessagesOut.WithLabelValues("answer").Inc()
	return nil
}

// ncl is the scope as ncl's flags.
func (c chatCommand) ncl() string {
	switch c.scope {
	case guardv1.FreezeScope_FREEZE_SCOPE_ALL:
		return "--all"
	case guardv1.FreezeScope_FREEZE_SCOPE_GROUP:
		return "--group " + c.target
	}
	return "--runner " + c.target
}

func (c chatCommand) targets() (group, runner string) {
	if c.scope == guardv1.FreezeScope_FREEZE_SCOPE_GROUP {
		return c.target, ""
	}
	if c.scope == guardv1.FreezeScope_FREEZE_SCOPE_RUNNER {
		return "", c.target
	}
	return "", ""
}

func freezeList(fs []*guardv1.Freeze) string {
	if len(fs) == 0 {
		return "Nothing is frozen."
	}
	var b strings.Builder
	b.WriteString("🧊 Frozen now:")
	for _, f := range fs {
		b.WriteString("\n• ")
		switch f.GetScope() {
		case guardv1.FreezeScope_FREEZE_SCOPE_ALL:
			b.WriteString("every agent")
		case guardv1.FreezeScope_FREEZE_SCOPE_GROUP:
			name := f.GetGroupName()
			if name == "" {
				name = f.GetGroup()
			}
			b.WriteString("group " + name)
		default:
			b.WriteString("runner " + f.GetRunner())
		}
		b.WriteString(" — by " + f.GetFrozenBy())
		if f.GetReason() != "" {
			b.WriteString(": " + f.GetReason())
		}
	}
	return b.String()
}
