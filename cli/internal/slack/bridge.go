// Package slack is the Slack adapter of the reference chat bridge (package
// bridge has the core). It connects over Socket Mode — an outbound
// WebSocket, so the bridge needs no public endpoint — receives messages
// (events_api envelopes) and button presses and form submissions
// (interactive envelopes), hands them to the core, and sends the core's
// cards as Block Kit messages with buttons through the Web API.
//
// Users are "slack:<Slack user id>" (U…, W… on Enterprise Grid: stable,
// unlike a display name). A user's DM with the bot is addressed by the
// user's id, as on Telegram: a card for slack:U123 goes to the DM
// conversations.open gives for U123, and a DM message routes as the chat
// "U123". Channels and group DMs are chats keyed by their channel id.
//
// Restart safety: an events_api envelope is acknowledged only once its
// message is handled (Slack delivers an unacknowledged one again, and the
// server recognises a routed message by its id); an interactive one at
// once, as Slack wants within 3 seconds (it never delivers one again),
// and a stop lets the item in hand finish.
package slack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"
	"google.golang.org/grpc"

	"github.com/clawguard/clawguard/cli/internal/bridge"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Bridge is one running Slack bridge.
type Bridge struct {
	core  *bridge.Bridge
	slack *adapter
}

// adapter is Slack as the core's bridge.Chat.
type adapter struct {
	core *bridge.Bridge
	log  *slog.Logger
	api  *slack.Client
	sm   *socketmode.Client

	botUser   string // the bot's own user id (its messages are not routed)
	connected atomic.Bool

	mu    sync.Mutex
	dms   map[string]string // user id → DM channel id
	names map[string]string // user or channel id → its name
}

// Spec is the Slack bridge's chat. Slack has no toast on a button: a
// refused press is shown on the pressed card.
var Spec = bridge.Spec{Namespace: ChannelType, Title: "Slack", Ops: []string{"socket"}, AnswersOnCard: true}

// New builds a bridge over an open connection to the control plane.
func New(cfg Config, conn grpc.ClientConnInterface, log *slog.Logger) (*Bridge, error) {
	core, err := bridge.New(cfg, Spec, conn, log)
	if err != nil {
		return nil, err
	}
	api := slack.New(cfg.BotToken, slack.OptionAPIURL(cfg.apiURL()), slack.OptionAppLevelToken(cfg.AppToken),
		slack.OptionHTTPClient(&http.Client{Timeout: 30 * time.Second}))
	a := &adapter{
		core: core, log: log, api: api,
		sm:  socketmode.New(api, socketmode.OptionLog(slogPrinter{log})),
		dms: map[string]string{}, names: map[string]string{},
	}
	core.SetChat(a)
	return &Bridge{core: core, slack: a}, nil
}

// Run serves until ctx ends, then lets the item in hand of every loop
// finish (within ShutdownGrace) and returns.
func (b *Bridge) Run(ctx context.Context) error { return b.core.Run(ctx) }

// HTTPAddr is the bound address of /healthz, /readyz and /metrics, once
// listening.
func (b *Bridge) HTTPAddr(ctx context.Context) (string, error) { return b.core.HTTPAddr(ctx) }

// NotReady says why the bridge is not ready ("" = ready).
func (b *Bridge) NotReady() string { return b.core.NotReady() }

// slogPrinter sends socketmode's own lines (debug only) to the JSON log.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Output(_ int, s string) error {
	p.log.Debug("slack socket mode", "msg", strings.TrimSpace(s))
	return nil
}

func (a *adapter) Connect(ctx context.Context) (string, error) {
	me, err := a.api.AuthTestContext(ctx)
	if err != nil {
		return "", fmt.Errorf("auth.test: %w", err)
	}
	a.botUser = me.UserID
	return fmt.Sprintf("@%s (%s) in %s", me.User, me.UserID, me.Team), nil
}

// isUser: Slack user ids start with U (W on Enterprise Grid); channel ids
// with C, G or D, so a DM keyed by its user's id is never a channel's.
func isUser(id string) bool {
	if len(id) < 2 || (id[0] != 'U' && id[0] != 'W') {
		return false
	}
	for _, r := range id[1:] {
		if (r < 'A' || r > 'Z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// DMChat: a Slack user's DM is addressed by the user's id.
func (a *adapter) DMChat(handle string) (string, bool) { return handle, isUser(handle) }

// channel is where a message to chat goes: a user's DM (opened once and
// remembered), or the channel itself.
func (a *adapter) channel(ctx context.Context, chat string) (string, error) {
	if !isUser(chat) {
		if chat == "" || strings.ContainsAny(chat, " \t\n") {
			return "", fmt.Errorf("chat %q: %w", chat, bridge.ErrNotAChat)
		}
		return chat, nil
	}
	a.mu.Lock()
	dm, ok := a.dms[chat]
	a.mu.Unlock()
	if ok {
		return dm, nil
	}
	ch, _, _, err := a.api.OpenConversationContext(ctx, &slack.OpenConversationParameters{Users: []string{chat}})
	if err != nil {
		return "", fmt.Errorf("conversations.open with %s: %w", chat, err)
	}
	a.mu.Lock()
	a.dms[chat] = ch.ID
	a.mu.Unlock()
	return ch.ID, nil
}

func (a *adapter) Post(ctx context.Context, chat, text string, buttons []bridge.Button) (bridge.Card, error) {
	ch, err := a.channel(ctx, chat)
	if err != nil {
		return bridge.Card{}, err
	}
	_, ts, err := a.api.PostMessageContext(ctx, ch, message(text, buttons)...)
	if err != nil {
		return bridge.Card{}, fmt.Errorf("chat.postMessage to %s: %w", ch, err)
	}
	return bridge.Card{Chat: bridge.ID(chat), Message: bridge.ID(ts)}, nil
}

func (a *adapter) Edit(ctx context.Context, at bridge.Card, text string, buttons []bridge.Button) error {
	ch, err := a.channel(ctx, string(at.Chat))
	if err != nil {
		return err
	}
	if _, _, _, err := a.api.UpdateMessageContext(ctx, ch, string(at.Message), message(text, buttons)...); err != nil {
		return fmt.Errorf("chat.update %s/%s: %w", ch, at.Message, err)
	}
	return nil
}

// Answer is an ephemeral line to the presser under the pressed message
// ("only visible to you"), Slack's nearest to a toast on the button.
func (a *adapter) Answer(ctx context.Context, c bridge.Click, text string, alert bool) {
	if c.Chat == "" {
		return
	}
	if _, err := a.api.PostEphemeralContext(ctx, string(c.Chat), c.Handle, slack.MsgOptionText(text, true)); err != nil {
		a.core.Metrics().Errors.WithLabelValues("send").Inc()
		a.log.Warn("answering a button press failed", "err", err)
	}
}

// reasonForm is the callback id of the reject-reason modal; its metadata
// is the hold id.
const (
	reasonForm  = "reject_reason"
	reasonBlock = "reason"
)

// AskReason opens a form for the reason (the DM prompt still works: the
// server takes the approver's next DM as the reason too).
func (a *adapter) AskReason(ctx context.Context, c bridge.Click, h *guardv1.Hold) {
	if c.ID == "" {
		return
	}
	input := slack.NewPlainTextInputBlockElement(nil, reasonBlock).WithMaxLength(bridge.MaxReasonChars).WithMultiline(true)
	title := h.GetTitle()
	if title == "" {
		title = h.GetKind()
	}
	view := slack.ModalViewRequest{
		Type: slack.VTModal, CallbackID: reasonForm, PrivateMetadata: h.GetId(),
		Title:  plain("Reject with reason"),
		Submit: plain("Reject"),
		Close:  plain("Cancel"),
		Blocks: slack.Blocks{BlockSet: []slack.Block{
			slack.NewSectionBlock(plain(clip("Rejecting “"+title+"”", 3000)), nil, nil),
			slack.NewInputBlock(reasonBlock, plain("Reason (relayed to the requester)"), nil, input),
		}},
	}
	if _, err := a.api.OpenViewContext(ctx, c.ID, view); err != nil {
		a.core.Metrics().Errors.WithLabelValues("send").Inc()
		a.log.Warn("reason form not opened; the DM prompt stands", "hold", h.GetId(), "err", err)
	}
}

// Retryable: rate limits, 5xx and network errors are worth another try;
// Slack's own refusals (channel_not_found, not_in_channel, invalid_auth,
// …) are not, except the few that mean it is briefly away.
func (a *adapter) Retryable(err error) (bool, time.Duration) {
	var limited *slack.RateLimitedError
	var code slack.StatusCodeError
	var refused slack.SlackErrorResponse
	switch {
	case errors.As(err, &limited):
		return true, limited.RetryAfter
	case errors.As(err, &code):
		return code.Code >= 500, 0
	case errors.As(err, &refused):
		switch refused.Err {
		case "ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout":
			return true, 0
		}
		return false, 0
	case errors.Is(err, slack.ErrParametersMissing), errors.Is(err, slack.ErrBlockIDNotUnique):
		return false, 0
	}
	return true, 0
}

// NotReady: the Socket Mode connection is up.
func (a *adapter) NotReady() string {
	if !a.connected.Load() {
		return "slack socket mode is not connected"
	}
	return ""
}
