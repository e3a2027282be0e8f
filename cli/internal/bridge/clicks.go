package bridge

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/clawguard/clawguard/proto/click"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Click is a press of a card's button, as the chat received it.
type Click struct {
	ID      string // the platform's handle of the press (Telegram's callback query id, Slack's trigger id)
	Handle  string // the presser's platform id (after "<namespace>:")
	Data    string // the button's data (CallbackData)
	Message ID     // the pressed message, when the platform says (Slack)
	Chat    ID     // the chat it is in, when the platform says
}

// CallbackData names a hold and the index of the pressed option (Telegram
// allows 64 bytes; option values such as "connect:<group id>" may not fit).
func CallbackData(holdID string, option int) string {
	return fmt.Sprintf("h:%s:%d", holdID, option)
}

// ParseCallbackData reads CallbackData.
func ParseCallbackData(d string) (string, int, bool) {
	rest, ok := strings.CutPrefix(d, "h:")
	if !ok {
		return "", 0, false
	}
	i := strings.LastIndexByte(rest, ':')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(rest[i+1:])
	if err != nil || n < 0 {
		return "", 0, false
	}
	return rest[:i], n, true
}

// Resolution maps a pressed option to Resolve: "reject…" options reject
// (the value travels as the choice, so "reject_with_reason" arms the
// reason capture); every other option approves with its value as the
// choice (channel registration's "connect:<group>" and "new").
func Resolution(value string) (guardv1.Outcome, string) {
	if strings.HasPrefix(value, "reject") {
		return guardv1.Outcome_OUTCOME_REJECT, value
	}
	return guardv1.Outcome_OUTCOME_APPROVE, value
}

// resolve is one approver's Resolve through click.Resolve: a click the
// server cannot take now is asked again after its hint; one still refused
// that way goes back to the caller's retry, which asks again. A button
// pressed twice, or an attempt whose answer was lost, is recognised as this
// user's resolution.
func (b *Bridge) resolve(ctx context.Context, req *guardv1.ResolveRequest) (click.Result, error) {
	return click.Resolve(ctx, click.Calls{
		Resolve: func(ctx context.Context, r *guardv1.ResolveRequest) (*guardv1.ResolveResponse, error) {
			return b.appr.Resolve(ctx, r)
		},
		Get: func(ctx context.Context, id string) (*guardv1.Hold, error) {
			g, err := b.appr.Get(ctx, &guardv1.GetRequest{Id: id})
			return g.GetHold(), err
		},
	}, req, click.Options{
		Clicker: req.GetAsUser(), Earlier: true,
		OnRetry: func(err error, wait time.Duration) {
			b.log.Warn("click not taken now; asking again", "hold", req.GetId(), "user", req.GetAsUser(), "err", err, "in", wait)
		},
	})
}

// HandleClick resolves a hold as the pressing user. Refusals are answered
// on the button (and, for a chat that says so, on the card); the card
// itself is edited from the Watch stream when the hold resolves, whichever
// path resolved it.
func (b *Bridge) HandleClick(ctx context.Context, c Click) error {
	holdID, idx, ok := ParseCallbackData(c.Data)
	if !ok {
		b.chat.Answer(ctx, c, "Unknown button.", false)
		b.m.Clicks.WithLabelValues("stale").Inc()
		return nil
	}
	clicker := b.UserID(c.Handle)
	got, err := b.appr.Get(ctx, &guardv1.GetRequest{Id: holdID})
	if err != nil {
		if b.Transient(err) {
			return err
		}
		b.chat.Answer(ctx, c, "This request no longer exists.", false)
		b.m.Clicks.WithLabelValues("stale").Inc()
		return nil
	}
	hold := got.GetHold()
	if idx >= len(hold.GetOptions()) {
		b.chat.Answer(ctx, c, "This button is out of date.", false)
		b.m.Clicks.WithLabelValues("stale").Inc()
		return nil
	}
	value := hold.GetOptions()[idx].GetValue()
	outcome, choice := Resolution(value)
	res, err := b.resolve(ctx, &guardv1.ResolveRequest{Id: holdID, Outcome: outcome, AsUser: clicker, Choice: choice})
	if err != nil {
		if b.Transient(err) {
			return err
		}
		msg := status.Convert(err).Message()
		switch status.Code(err) {
		case codes.PermissionDenied:
			b.refuse(ctx, c, hold, "You may not decide this request.", "⛔ "+clicker+" may not decide this request.")
			b.m.Clicks.WithLabelValues("refused").Inc()
		case codes.FailedPrecondition, codes.NotFound:
			b.refuse(ctx, c, hold, "Not possible now: "+msg, "⚠️ Not possible now for "+clicker+": "+msg)
			b.m.Clicks.WithLabelValues("stale").Inc()
		default:
			b.refuse(ctx, c, hold, "Failed: "+msg, "⚠️ "+clicker+"'s click failed: "+msg)
			b.m.Clicks.WithLabelValues("error").Inc()
		}
		b.log.Info("click refused", "hold", holdID, "user", clicker, "option", value, "err", err)
		return nil
	}
	h := res.Hold
	b.log.Info("click resolved", "hold", holdID, "user", clicker, "option", value, "status", h.GetStatus().String(), "repeated", res.Repeated)
	switch {
	case h.GetAwaitingReasonFrom() == clicker && h.GetStatus() == guardv1.HoldStatus_HOLD_STATUS_PENDING:
		b.m.Clicks.WithLabelValues("awaiting_reason").Inc()
		b.chat.Answer(ctx, c, "Send the reason as your next message.", false)
		b.prompt(ctx, c.Handle, fmt.Sprintf("✍️ Reply with the reason for rejecting “%s” (at most 280 characters).", h.GetTitle()))
		b.chat.AskReason(ctx, c, h)
		b.noteOnCard(ctx, h, "✍️ Waiting for the reason from "+clicker, nil)
	case value == "new":
		b.m.Clicks.WithLabelValues("resolved").Inc()
		b.chat.Answer(ctx, c, "Send the new agent's name as your next message.", false)
		b.prompt(ctx, c.Handle, "✍️ Reply with the name of the new agent for this chat.")
	case h.GetStatus() == guardv1.HoldStatus_HOLD_STATUS_PENDING && outcome == guardv1.Outcome_OUTCOME_APPROVE:
		// One approval of a quorum: recorded, more are needed.
		b.m.Clicks.WithLabelValues("resolved").Inc()
		progress := QuorumProgress(h)
		b.chat.Answer(ctx, c, "Approval recorded ("+progress+").", false)
		b.noteOnCard(ctx, h, "👍 "+clicker+" approved ("+progress+" approvals)", nil)
	default:
		b.m.Clicks.WithLabelValues("resolved").Inc()
		b.chat.Answer(ctx, c, "Done.", false)
	}
	return nil
}

// QuorumProgress is "<counted> of <required>" for a hold short of its
// quorum (approvals no longer eligible do not count).
func QuorumProgress(h *guardv1.Hold) string {
	counted := 0
	for _, a := range h.GetApprovals() {
		if !a.GetIneligible() {
			counted++
		}
	}
	return fmt.Sprintf("%d of %d", counted, h.GetApprovalsRequired())
}

// refuse answers a press that changed nothing. A chat that answers on the
// card (Spec.AnswersOnCard) shows it there, on the pressed card while it is
// still one of the hold's open cards; otherwise, and when that card is gone,
// the presser is answered.
func (b *Bridge) refuse(ctx context.Context, c Click, h *guardv1.Hold, answer, line string) {
	if b.spec.AnswersOnCard && c.Message != "" &&
		b.noteOnCard(ctx, h, line, func(card Card) bool { return card.Message == c.Message }) {
		return
	}
	b.chat.Answer(ctx, c, answer, true)
}

// SubmitReason rejects a hold with the reason its approver gave in a form
// of the chat (Slack's modal) rather than as their next DM: Resolve as that
// user, so mayResolve runs again, as for a reason captured from a DM. The
// approver is told the outcome in their DM.
func (b *Bridge) SubmitReason(ctx context.Context, handle, holdID, reason string) error {
	clicker := b.UserID(handle)
	reason = strings.TrimSpace(reason)
	if r := []rune(reason); len(r) > MaxReasonChars {
		reason = string(r[:MaxReasonChars]) // clamped, as the DM capture does
	}
	if reason == "" {
		b.prompt(ctx, handle, "✍️ The reason must not be empty; reply again.")
		return nil
	}
	_, err := b.resolve(ctx, &guardv1.ResolveRequest{Id: holdID, Outcome: guardv1.Outcome_OUTCOME_REJECT, AsUser: clicker, Reason: reason})
	if err != nil {
		if b.Transient(err) {
			return err
		}
		b.log.Info("reject reason refused", "hold", holdID, "user", clicker, "err", err)
		b.prompt(ctx, handle, "⚠️ reject reason refused: "+status.Convert(err).Message())
		return nil
	}
	b.log.Info("hold rejected with the approver's reason", "hold", holdID, "user", clicker)
	b.m.MessagesIn.WithLabelValues("reason_captured").Inc()
	b.prompt(ctx, handle, "✍️ rejected with your reason")
	return nil
}

// MaxReasonChars bounds a reject reason (the server's limit: it is relayed
// to the requester).
const MaxReasonChars = 280

// prompt sends a line to a user's DM (what a capture waits for, what came
// of a form).
func (b *Bridge) prompt(ctx context.Context, handle, text string) {
	chat, ok := b.chat.DMChat(handle)
	if !ok {
		return
	}
	if _, err := b.chat.Post(ctx, chat, text, nil); err != nil {
		b.m.Errors.WithLabelValues("send").Inc()
		b.log.Warn("prompting for a reply failed", "user", handle, "err", err)
		return
	}
	b.m.MessagesOut.WithLabelValues("prompt").Inc()
}
