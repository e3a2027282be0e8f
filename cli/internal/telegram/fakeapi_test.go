package telegram

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"
)

// fakeTelegram is the few Bot API methods the bridge uses, served over
// HTTP like api.telegram.org: getMe, getUpdates (long poll; an offset
// confirms every update below it), sendMessage, editMessageText and
// answerCallbackQuery. It records what the bot sent.
type fakeTelegram struct {
	t     *testing.T
	srv   *httptest.Server
	token string

	mu       sync.Mutex
	wake     chan struct{}
	queue    []*models.Update // unconfirmed updates
	nextUpd  int64
	nextMsg  int
	sent     []fakeMessage
	edits    []fakeMessage
	answers  []string
	polls    int
	failSend bool
}

// fakeMessage is a message the bot sent or edited.
type fakeMessage struct {
	ChatID    int64
	MessageID int
	Text      string
	Buttons   []models.InlineKeyboardButton
}

func (m fakeMessage) Body() string     { return m.Text }
func (m fakeMessage) HasButtons() bool { return len(m.Buttons) > 0 }

func newFakeTelegram(t *testing.T) *fakeTelegram {
	f := &fakeTelegram{t: t, token: "123456:TEST-token", wake: make(chan struct{}), nextUpd: 1000, nextMsg: 1}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeTelegram) serve(w http.ResponseWriter, r *http.Request) {
	method, ok := strings.CutPrefix(r.URL.Path, "/bot"+f.token+"/")
	if !ok {
		writeAPI(w, http.StatusUnauthorized, false, nil, "Unauthorized")
		return
	}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/") {
		_ = r.ParseMultipartForm(1 << 20)
	} else {
		_ = r.ParseForm()
	}
	switch method {
	case "getMe":
		writeAPI(w, 200, true, models.User{ID: 123456, IsBot: true, FirstName: "Clawguard", Username: "clawguard_test_bot"}, "")
	case "getUpdates":
		f.getUpdates(w, r)
	case "sendMessage":
		f.mu.Lock()
		if f.failSend {
			f.mu.Unlock()
			writeAPI(w, http.StatusBadGateway, false, nil, "Bad Gateway")
			return
		}
		m := fakeMessage{ChatID: formInt(r, "chat_id"), MessageID: f.nextMsg, Text: r.FormValue("text"), Buttons: buttons(r)}
		f.nextMsg++
		f.sent = append(f.sent, m)
		f.mu.Unlock()
		writeAPI(w, 200, true, models.Message{ID: m.MessageID, Chat: models.Chat{ID: m.ChatID}, Text: m.Text, Date: int(time.Now().Unix())}, "")
	case "editMessageText":
		m := fakeMessage{ChatID: formInt(r, "chat_id"), MessageID: int(formInt(r, "message_id")), Text: r.FormValue("text"), Buttons: buttons(r)}
		f.mu.Lock()
		f.edits = append(f.edits, m)
		f.mu.Unlock()
		writeAPI(w, 200, true, models.Message{ID: m.MessageID, Chat: models.Chat{ID: m.ChatID}, Text: m.Text}, "")
	case "answerCallbackQuery":
		f.mu.Lock()
		f.answers = append(f.answers, r.FormValue("text"))
		f.mu.Unlock()
		writeAPI(w, 200, true, true, "")
	default:
		writeAPI(w, http.StatusNotFound, false, nil, "Not Found: method "+method)
	}
}

func (f *fakeTelegram) getUpdates(w http.ResponseWriter, r *http.Request) {
	offset := formInt(r, "offset")
	timeout := time.Duration(formInt(r, "timeout")) * time.Second
	deadline := time.After(timeout)
	for {
		f.mu.Lock()
		f.polls++
		// Asking with an offset confirms every update below it.
		kept := f.queue[:0]
		for _, u := range f.queue {
			if u.ID >= offset {
				kept = append(kept, u)
			}
		}
		f.queue = kept
		out := append([]*models.Update(nil), f.queue...)
		wake := f.wake
		f.mu.Unlock()
		if len(out) > 0 {
			writeAPI(w, 200, true, out, "")
			return
		}
		select {
		case <-wake:
		case <-deadline:
			writeAPI(w, 200, true, []*models.Update{}, "")
			return
		case <-r.Context().Done():
			return
		}
	}
}

func (f *fakeTelegram) push(u *models.Update) {
	f.mu.Lock()
	defer f.mu.Unlock()
	u.ID = f.nextUpd
	f.nextUpd++
	f.queue = append(f.queue, u)
	close(f.wake)
	f.wake = make(chan struct{})
}

// say is a user's text message in a chat (a private chat when chatID is
// the user's id).
func (f *fakeTelegram) say(userID, chatID int64, text string) {
	typ := models.ChatTypePrivate
	if chatID != userID {
		typ = models.ChatTypeGroup
	}
	f.push(&models.Update{Message: &models.Message{
		ID:   int(f.nextUpd),
		From: &models.User{ID: userID, FirstName: "U" + strconv.FormatInt(userID, 10)},
		Chat: models.Chat{ID: chatID, Type: typ, Title: "chat " + strconv.FormatInt(chatID, 10)},
		Date: int(time.Now().Unix()), Text: text,
	}})
}

// tap presses the button labelled label on card m as userID.
func (f *fakeTelegram) tap(userID int64, m fakeMessage, label string) {
	f.t.Helper()
	for _, b := range m.Buttons {
		if b.Text == label {
			f.push(&models.Update{CallbackQuery: &models.CallbackQuery{
				ID: "cb" + strconv.FormatInt(f.nextUpd, 10), From: models.User{ID: userID}, Data: b.CallbackData,
			}})
			return
		}
	}
	f.t.Fatalf("card %d in chat %d has no button %q (has %v)", m.MessageID, m.ChatID, label, m.Buttons)
}

func (f *fakeTelegram) sentTo(chatID int64) []fakeMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeMessage
	for _, m := range f.sent {
		if m.ChatID == chatID {
			out = append(out, m)
		}
	}
	return out
}

// cards are the sent messages with buttons.
func (f *fakeTelegram) cards() []fakeMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeMessage
	for _, m := range f.sent {
		if len(m.Buttons) > 0 {
			out = append(out, m)
		}
	}
	return out
}

func (f *fakeTelegram) editsOf(chatID int64, messageID int) []fakeMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeMessage
	for _, m := range f.edits {
		if m.ChatID == chatID && m.MessageID == messageID {
			out = append(out, m)
		}
	}
	return out
}

func (f *fakeTelegram) unconfirmed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.queue)
}

func formInt(r *http.Request, key string) int64 {
	n, _ := strconv.ParseInt(r.FormValue(key), 10, 64)
	return n
}

func buttons(r *http.Request) []models.InlineKeyboardButton {
	raw := r.FormValue("reply_markup")
	if raw == "" {
		return nil
	}
	var kb models.InlineKeyboardMarkup
	if err := json.Unmarshal([]byte(raw), &kb); err != nil {
		return nil
	}
	var out []models.InlineKeyboardButton
	for _, row := range kb.InlineKeyboard {
		out = append(out, row...)
	}
	return out
}

func writeAPI(w http.ResponseWriter, code int, ok bool, result any, desc string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	body := map[string]any{"ok": ok}
	if ok {
		body["result"] = result
	} else {
		body["description"] = desc
		body["error_code"] = code
	}
	_ = json.NewEncoder(w).Encode(body)
}
