// Package telegram is the Telegram adapter of the reference chat bridge
// (package bridge has the core): it long-polls the Bot API for messages and
// button presses, hands them to the core, and sends and edits the core's
// cards and messages as Telegram messages with inline keyboards.
//
// Users are "telegram:<numeric user id>" (Telegram's stable id; a private
// chat's id is its user's id, so a card for telegram:42 goes to chat 42).
// Chats are "telegram" messaging groups keyed by the chat id.
//
// Restart safety: the Telegram update offset lives in the core's state
// file; an update is confirmed to Telegram only once it is handled, and a
// stop lets the item in hand finish.
package telegram

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
	"google.golang.org/grpc"

	"github.com/clawguard/clawguard/cli/internal/bridge"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Bridge is one running Telegram bridge.
type Bridge struct {
	core *bridge.Bridge
	tg   *adapter
}

// adapter is Telegram as the core's bridge.Chat.
type adapter struct {
	core        *bridge.Bridge
	log         *slog.Logger
	api         *botAPI
	pollTimeout time.Duration
	lastPoll    atomic.Int64 // unix nanos of the last successful getUpdates
}

// Spec is the Telegram bridge's chat.
var Spec = bridge.Spec{Namespace: ChannelType, Title: "Telegram", Ops: []string{"get_updates"}}

// New builds a bridge over an open connection to the control plane.
func New(cfg Config, conn grpc.ClientConnInterface, log *slog.Logger) (*Bridge, error) {
	core, err := bridge.New(cfg, Spec, conn, log)
	if err != nil {
		return nil, err
	}
	api, err := newBotAPI(cfg.APIURL, cfg.BotToken, cfg.PollTimeout, log)
	if err != nil {
		return nil, err
	}
	tg := &adapter{core: core, log: log, api: api, pollTimeout: cfg.PollTimeout}
	core.SetChat(tg)
	return &Bridge{core: core, tg: tg}, nil
}

// Run serves until ctx ends, then lets the item in hand of every loop
// finish (within ShutdownGrace) and returns.
func (b *Bridge) Run(ctx context.Context) error { return b.core.Run(ctx) }

// HTTPAddr is the bound address of /healthz, /readyz and /metrics, once
// listening.
func (b *Bridge) HTTPAddr(ctx context.Context) (string, error) { return b.core.HTTPAddr(ctx) }

// notReady says why the bridge is not ready ("" = ready).
func (b *Bridge) notReady() string { return b.core.NotReady() }

func userID(telegramUserID int64) string {
	return ChannelType + ":" + strconv.FormatInt(telegramUserID, 10)
}

func (t *adapter) Connect(ctx context.Context) (string, error) {
	me, err := t.api.me(ctx)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("@%s (%d)", me.Username, me.ID), nil
}

func (t *adapter) Receive(ctx context.Context) error { return t.pollLoop(ctx) }

// DMChat: a Telegram user's private chat with the bot has the user's id.
func (t *adapter) DMChat(handle string) (string, bool) {
	_, err := strconv.ParseInt(handle, 10, 64)
	return handle, err == nil
}

func chatID(chat string) (int64, error) {
	id, err := strconv.ParseInt(chat, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("chat %q: %w", chat, bridge.ErrNotAChat)
	}
	return id, nil
}

func (t *adapter) Post(ctx context.Context, chat, text string, buttons []bridge.Button) (bridge.Card, error) {
	id, err := chatID(chat)
	if err != nil {
		return bridge.Card{}, err
	}
	msgID, err := t.api.send(ctx, id, text, keyboard(buttons))
	if err != nil {
		return bridge.Card{}, err
	}
	return bridge.Card{Chat: bridge.ID(chat), Message: bridge.ID(strconv.Itoa(msgID))}, nil
}

func (t *adapter) Edit(ctx context.Context, at bridge.Card, text string, buttons []bridge.Button) error {
	id, err := chatID(string(at.Chat))
	if err != nil {
		return err
	}
	msgID, err := strconv.Atoi(string(at.Message))
	if err != nil {
		return fmt.Errorf("message %q: %w", at.Message, bridge.ErrNotAChat)
	}
	return t.api.edit(ctx, id, msgID, text, keyboard(buttons))
}

// keyboard has one row per button (nil: none).
func keyboard(buttons []bridge.Button) *models.InlineKeyboardMarkup {
	if len(buttons) == 0 {
		return nil
	}
	kb := &models.InlineKeyboardMarkup{}
	for _, b := range buttons {
		btn := models.InlineKeyboardButton{Text: b.Label, CallbackData: b.Data}
		if b.URL != "" {
			btn = models.InlineKeyboardButton{Text: b.Label, URL: b.URL}
		}
		kb.InlineKeyboard = append(kb.InlineKeyboard, []models.InlineKeyboardButton{btn})
	}
	return kb
}

// Answer is Telegram's toast on the pressed button (an alert for a refusal).
func (t *adapter) Answer(ctx context.Context, c bridge.Click, text string, alert bool) {
	if err := t.api.answer(ctx, c.ID, text, alert); err != nil {
		t.core.Metrics().Errors.WithLabelValues("send").Inc()
		t.log.Warn("answering a button press failed", "err", err)
	}
}

// AskReason: the DM prompt is all Telegram has.
func (t *adapter) AskReason(context.Context, bridge.Click, *guardv1.Hold) {}

func (t *adapter) Retryable(err error) (bool, time.Duration) {
	var tooMany *bot.TooManyRequestsError
	switch {
	case errors.As(err, &tooMany):
		return true, time.Duration(tooMany.RetryAfter) * time.Second // Telegram's flood control says how long
	case errors.Is(err, bot.ErrorForbidden), errors.Is(err, bot.ErrorBadRequest),
		errors.Is(err, bot.ErrorNotFound), errors.Is(err, bot.ErrorUnauthorized), errors.Is(err, bot.ErrorConflict):
		return false, 0
	}
	return true, 0 // network errors, 5xx
}

// NotReady: Telegram polled recently.
func (t *adapter) NotReady() string {
	if time.Since(time.Unix(0, t.lastPoll.Load())) > 2*t.pollTimeout+10*time.Second {
		return "telegram getUpdates has not succeeded recently"
	}
	return ""
}
