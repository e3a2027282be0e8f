package telegram

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
)

// botAPI is the Bot API as the bridge uses it: go-telegram/bot for every
// method except getUpdates. The library's own poller confirms an update
// (asks for the next offset) before its handler has run, so a stop in
// between loses a click; the bridge polls itself and moves the offset only
// after the update is handled and the new offset is on disk.
type botAPI struct {
	b       *bot.Bot
	client  *http.Client
	updates string // getUpdates URL (holds the bot token: never log it)
}

func newBotAPI(apiURL, token string, pollTimeout time.Duration, log *slog.Logger) (*botAPI, error) {
	client := &http.Client{Timeout: pollTimeout + 15*time.Second}
	b, err := bot.New(token, bot.WithServerURL(apiURL), bot.WithSkipGetMe(), bot.WithHTTPClient(pollTimeout, client),
		// The library's own complaints go to our JSON log, not to the standard logger.
		bot.WithErrorsHandler(func(err error) { log.Warn("telegram client", "err", err) }))
	if err != nil {
		return nil, fmt.Errorf("telegram client: %w", err)
	}
	return &botAPI{b: b, client: client, updates: strings.TrimRight(apiURL, "/") + "/bot" + token + "/getUpdates"}, nil
}

// me checks the token (getMe) and returns the bot's user.
func (t *botAPI) me(ctx context.Context) (*models.User, error) {
	u, err := t.b.GetMe(ctx)
	if err != nil {
		return nil, fmt.Errorf("getMe: %w", err)
	}
	return u, nil
}

// getUpdates long-polls for updates from offset on; asking with offset
// confirms every update below it to Telegram.
func (t *botAPI) getUpdates(ctx context.Context, offset int64, timeout time.Duration) ([]*models.Update, error) {
	form := url.Values{
		"offset":          {strconv.FormatInt(offset, 10)},
		"timeout":         {strconv.Itoa(int(timeout / time.Second))},
		"allowed_updates": {`["message","callback_query"]`},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.updates, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("getUpdates: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := t.client.Do(req)
	if err != nil {
		// The URL holds the token: report the method, not the URL.
		if ue, ok := err.(*url.Error); ok {
			err = ue.Err
		}
		return nil, fmt.Errorf("getUpdates: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return nil, fmt.Errorf("getUpdates: %w", err)
	}
	var out struct {
		OK          bool             `json:"ok"`
		Result      []*models.Update `json:"result"`
		Description string           `json:"description"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("getUpdates: HTTP %d: undecodable answer: %w", resp.StatusCode, err)
	}
	if !out.OK {
		return nil, fmt.Errorf("getUpdates: HTTP %d: %s", resp.StatusCode, out.Description)
	}
	return out.Result, nil
}

func (t *botAPI) send(ctx context.Context, chatID int64, text string, kb *models.InlineKeyboardMarkup) (int, error) {
	p := &bot.SendMessageParams{ChatID: chatID, Text: text}
	if kb != nil {
		p.ReplyMarkup = kb
	}
	m, err := t.b.SendMessage(ctx, p)
	if err != nil {
		return 0, fmt.Errorf("sendMessage to %d: %w", chatID, err)
	}
	return m.ID, nil
}

// edit replaces a card's text; its buttons become kb (nil: none).
func (t *botAPI) edit(ctx context.Context, chatID int64, messageID int, text string, kb *models.InlineKeyboardMarkup) error {
	p := &bot.EditMessageTextParams{ChatID: chatID, MessageID: messageID, Text: text}
	if kb != nil {
		p.ReplyMarkup = kb
	}
	_, err := t.b.EditMessageText(ctx, p)
	if err != nil && strings.Contains(err.Error(), "message is not modified") {
		return nil // already shows this (a replayed edit)
	}
	if err != nil {
		return fmt.Errorf("editMessageText %d/%d: %w", chatID, messageID, err)
	}
	return nil
}

func (t *botAPI) answer(ctx context.Context, callbackID, text string, alert bool) error {
	_, err := t.b.AnswerCallbackQuery(ctx, &bot.AnswerCallbackQueryParams{CallbackQueryID: callbackID, Text: text, ShowAlert: alert})
	if err != nil {
		return fmt.Errorf("answerCallbackQuery: %w", err)
	}
	return nil
}
