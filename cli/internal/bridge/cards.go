package bridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/holdcard"
)

// watchLoop follows Approvals.Watch from the stored cursor. Each event is
// handled (a card sent or edited) and then the cursor moves, in one atomic
// state write with the card map; a replayed event finds its card recorded
// and sends nothing twice.
func (b *Bridge) watchLoop(ctx context.Context) error {
	return b.follow(ctx, "watch", "Approvals.Watch", &b.watching, b.watchOnce, func(err error) error {
		if status.Code(err) != codes.OutOfRange {
			return nil
		}
		// The server pruned events past our cursor: restart at its current
		// end; holds created meanwhile got no card here (ncl and the
		// webhook still reach their approvers).
		b.log.Error("Approvals.Watch cursor was pruned; continuing from the current end", "cursor", b.st.snapshot().WatchCursor)
		return b.st.update(func(s *State) { s.WatchCursor = -1 })
	})
}

func (b *Bridge) watchOnce(ctx context.Context) error {
	cursor := b.st.snapshot().WatchCursor
	req := &guardv1.WatchRequest{AfterCursor: cursor}
	if cursor < 0 {
		req = &guardv1.WatchRequest{FromNow: true}
	}
	stream, err := b.appr.Watch(ctx, req)
	if err != nil {
		return err
	}
	if _, err := stream.Header(); err != nil {
		return err
	}
	b.watching.Store(true)
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return errors.New("stream closed by the server")
		}
		if err != nil {
			return err
		}
		err = b.finish(ctx, "watch", func(c context.Context) error { return b.handleEvent(c, ev) })
		if err != nil && b.Transient(err) {
			return err // stopped or gave up: the event is handled again after reconnecting
		}
		if err != nil {
			b.log.Error("hold event not shown", "cursor", ev.GetCursor(), "hold", ev.GetHold().GetId(), "err", err)
			if err := b.st.update(func(s *State) { s.WatchCursor = ev.GetCursor() }); err != nil {
				return err
			}
		}
	}
}

// handleEvent shows one lifecycle event and records the cursor with it.
func (b *Bridge) handleEvent(ctx context.Context, ev *guardv1.WatchResponse) error {
	h := ev.GetHold()
	switch ev.GetType() {
	case guardv1.EventType_EVENT_TYPE_REQUESTED, guardv1.EventType_EVENT_TYPE_ESCALATED:
		// An escalation's new approvers are recipients now: each gets the
		// card (those who have one are skipped).
		return b.sendCard(ctx, ev.GetCursor(), h)
	case guardv1.EventType_EVENT_TYPE_REMINDED:
		return b.sendReminder(ctx, ev.GetCursor(), h)
	case guardv1.EventType_EVENT_TYPE_RESOLVED:
		return b.closeCard(ctx, ev)
	}
	return b.st.update(func(s *State) { s.WatchCursor = ev.GetCursor() })
}

// sendCard DMs the card to each approver of this bridge's namespace the
// hold names (the approver it was delivered to, and every named approver
// of an exclusive rule: a quorum needs them all), while it is still
// pending (a replay from an old cursor sends no cards for holds decided
// meanwhile). Each card is recorded as soon as it is sent, so a retried
// event sends only the missing ones; the cursor moves once all are out.
func (b *Bridge) sendCard(ctx context.Context, cursor int64, h *guardv1.Hold) error {
	done := func(why string) error {
		b.log.Debug("card event handled", "hold", h.GetId(), "why", why)
		return b.st.update(func(s *State) { s.WatchCursor = cursor })
	}
	have := map[string]bool{}
	for _, c := range b.st.cards(h.GetId()) {
		have[string(c.Chat)] = true
	}
	var todo []string
	for _, u := range Recipients(h, b.spec.Namespace) {
		handle, _ := strings.CutPrefix(u, b.spec.Namespace+":")
		chat, ok := b.chat.DMChat(handle)
		if !ok {
			b.m.Cards.WithLabelValues("skipped").Inc()
			b.log.Warn("card not sent: not a user id of this chat", "hold", h.GetId(), "user", u)
			continue
		}
		if !have[chat] {
			todo = append(todo, chat)
		}
	}
	if len(todo) == 0 {
		return done("no approver without a card")
	}
	cur, err := b.appr.Get(ctx, &guardv1.GetRequest{Id: h.GetId()})
	if err != nil {
		if b.Transient(err) {
			return err
		}
		return done("hold unreadable: " + err.Error())
	}
	if cur.GetHold().GetStatus() != guardv1.HoldStatus_HOLD_STATUS_PENDING {
		return done("already resolved")
	}
	text, buttons := CardText(h), b.cardButtons(h)
	for _, chat := range todo {
		c, err := b.chat.Post(ctx, chat, text, buttons)
		if err != nil {
			if b.Transient(err) {
				return err
			}
			b.m.Errors.WithLabelValues("send").Inc()
			b.log.Warn("card not delivered (has the approver started a chat with the bot?)", "hold", h.GetId(), "chat", chat, "err", err)
			continue
		}
		// Recorded under the chat it was addressed to, whatever chat the
		// platform put it in, so a retried event finds it.
		c.Chat, c.Text = ID(chat), text
		b.m.Cards.WithLabelValues("sent").Inc()
		b.log.Info("card sent", "hold", h.GetId(), "kind", h.GetKind(), "chat", chat, "message", c.Message)
		if err := b.st.update(func(s *State) { s.Cards[h.GetId()] = append(s.Cards[h.GetId()], c) }); err != nil {
			return err
		}
	}
	return done("cards sent")
}

// ReminderPrefix starts a reminder's card (a retried event finds it and
// sends no second one).
const ReminderPrefix = "Reminder: still waiting for a decision.\n\n"

// sendReminder posts the card again, under a reminder line, to every
// recipient of this bridge's namespace while the hold is pending; each
// reminder card is recorded like a card (the resolution closes it).
func (b *Bridge) sendReminder(ctx context.Context, cursor int64, h *guardv1.Hold) error {
	done := func() error { return b.st.update(func(s *State) { s.WatchCursor = cursor }) }
	reminded := map[string]bool{}
	for _, c := range b.st.cards(h.GetId()) {
		if strings.HasPrefix(c.Text, ReminderPrefix) {
			reminded[string(c.Chat)] = true
		}
	}
	cur, err := b.appr.Get(ctx, &guardv1.GetRequest{Id: h.GetId()})
	if err != nil {
		if b.Transient(err) {
			return err
		}
		return done()
	}
	if cur.GetHold().GetStatus() != guardv1.HoldStatus_HOLD_STATUS_PENDING {
		return done()
	}
	text, buttons := ReminderPrefix+CardText(h), b.cardButtons(h)
	for _, u := range Recipients(h, b.spec.Namespace) {
		handle, _ := strings.CutPrefix(u, b.spec.Namespace+":")
		chat, ok := b.chat.DMChat(handle)
		if !ok || reminded[chat] {
			continue
		}
		c, err := b.chat.Post(ctx, chat, text, buttons)
		if err != nil {
			if b.Transient(err) {
				return err
			}
			b.m.Errors.WithLabelValues("send").Inc()
			b.log.Warn("reminder not delivered", "hold", h.GetId(), "chat", chat, "err", err)
			continue
		}
		c.Chat, c.Text = ID(chat), text
		b.m.Cards.WithLabelValues("sent").Inc()
		b.log.Info("reminder sent", "hold", h.GetId(), "chat", chat)
		if err := b.st.update(func(s *State) { s.Cards[h.GetId()] = append(s.Cards[h.GetId()], c) }); err != nil {
			return err
		}
	}
	return done()
}

// Recipients are the users of namespace ns a hold's card goes to.
func Recipients(h *guardv1.Hold, ns string) []string {
	var out []string
	add := func(u string) {
		if strings.HasPrefix(u, ns+":") && !slices.Contains(out, u) {
			out = append(out, u)
		}
	}
	add(h.GetDeliveredTo())
	for _, u := range h.GetAlsoDeliveredTo() {
		add(u)
	}
	for _, u := range h.GetEscalatedTo() {
		add(u)
	}
	if ex := h.GetApproverRule().GetExclusive(); ex != nil {
		add(ex.GetUserId())
		for _, u := range ex.GetAlsoUserIds() {
			add(u)
		}
	}
	return out
}

// closeCard edits a resolved hold's cards: who decided and how, or that it
// expired; the buttons go. A retried event edits again ("not modified" is
// success).
func (b *Bridge) closeCard(ctx context.Context, ev *guardv1.WatchResponse) error {
	h := ev.GetHold()
	b.cardMu.Lock()
	defer b.cardMu.Unlock()
	for _, c := range b.st.cards(h.GetId()) {
		if err := b.chat.Edit(ctx, c, c.Text+"\n\n"+OutcomeLine(ev), nil); err != nil {
			if b.Transient(err) {
				return err
			}
			b.m.Errors.WithLabelValues("edit").Inc()
			b.log.Warn("card not edited", "hold", h.GetId(), "chat", c.Chat, "err", err)
			continue
		}
		b.m.Cards.WithLabelValues("edited").Inc()
	}
	return b.st.update(func(s *State) {
		delete(s.Cards, h.GetId())
		s.WatchCursor = ev.GetCursor()
	})
}

// noteOnCard adds a line under a pending hold's cards (only: nil, every
// card) and keeps their buttons. A card closed meanwhile is left closed.
func (b *Bridge) noteOnCard(ctx context.Context, h *guardv1.Hold, line string, only func(Card) bool) bool {
	b.cardMu.Lock()
	defer b.cardMu.Unlock()
	noted := false
	for _, c := range b.st.cards(h.GetId()) {
		if only != nil && !only(c) {
			continue
		}
		if err := b.chat.Edit(ctx, c, c.Text+"\n\n"+line, b.cardButtons(h)); err != nil {
			b.m.Errors.WithLabelValues("edit").Inc()
			b.log.Warn("card note not shown", "hold", h.GetId(), "err", err)
			continue
		}
		noted = true
	}
	return noted
}

// CardText is a hold's card as a chat message (holdcard: what it says):
// its title, what it asks (an MCP call's exact call), when it expires and
// its id.
func CardText(h *guardv1.Hold) string {
	c := holdcard.Of(h)
	var sb strings.Builder
	fmt.Fprintf(&sb, "🔐 %s", c.Title)
	if c.Call != nil {
		sb.WriteString(mcpCallText(h.GetId(), c.Call))
	} else if c.Question != "" {
		fmt.Fprintf(&sb, "\n\n%s", c.Question)
	}
	if !c.Expires.IsZero() {
		fmt.Fprintf(&sb, "\n\nExpires %s.", c.Expires.UTC().Format("2006-01-02 15:04 MST"))
	}
	fmt.Fprintf(&sb, "\n(%s)", h.GetId())
	return sb.String()
}

// ConfirmLabel is the link of a hold a tap may not resolve.
const ConfirmLabel = "Confirm in the console"

// cardButtons are one button per option of the hold; a hold that must be
// confirmed in the console (Spec.ConsoleURL) has the link to it first.
func (b *Bridge) cardButtons(h *guardv1.Hold) []Button {
	var out []Button
	if b.spec.ConsoleURL != nil {
		if u := b.spec.ConsoleURL(h); u != "" {
			out = append(out, Button{Label: ConfirmLabel, URL: u})
		}
	}
	for i, o := range h.GetOptions() {
		out = append(out, Button{Label: o.GetLabel(), Data: CallbackData(h.GetId(), i)})
	}
	return out
}

// OutcomeLine is what a resolved hold's cards say under the card: how
// the event resolved it, by whom, and the card's choice or reason.
func OutcomeLine(ev *guardv1.WatchResponse) string {
	o := holdcard.Of(ev.GetHold()).Outcome
	switch ev.GetOutcome() {
	case guardv1.Outcome_OUTCOME_APPROVE:
		line := "✅ Approved by " + ev.GetResolver()
		if o.Choice != "" && ev.GetHold().GetChoice() != "approve" {
			line += " — " + o.Choice
		}
		return line
	case guardv1.Outcome_OUTCOME_REJECT:
		line := "❌ Rejected by " + ev.GetResolver()
		if o.Reason != "" {
			line += ": “" + o.Reason + "”"
		}
		return line
	case guardv1.Outcome_OUTCOME_EXPIRE:
		return "⌛ Expired without a decision."
	case guardv1.Outcome_OUTCOME_SWEEP:
		return "⌛ Expired: the control plane restarted while it waited."
	}
	return "Resolved."
}

// mcpCallText is an MCP tool call's card body: the call its grant is bound
// to (holdcard.Call), cut to what a chat message holds.
func mcpCallText(holdID string, call *holdcard.Call) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n\nGroup %s asks to call an MCP tool.\nServer: %s\nTool: %s\nArguments (exactly these run):\n",
		call.Group, call.Server, call.Tool)
	args := call.Arguments
	const max = 3000 // Telegram's message limit is 4096 characters, a Slack section's 3000
	if r := []rune(args); len(r) > max {
		args = string(r[:max]) + fmt.Sprintf("… [%d more characters: read them with ncl approvals get %s before approving]", len(r)-max, holdID)
	}
	sb.WriteString(args)
	return sb.String()
}
