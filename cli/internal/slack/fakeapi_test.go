package slack

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// fakeSlack is the part of Slack's Web API and Socket Mode the bridge uses,
// served over HTTP and a WebSocket like slack.com: auth.test,
// apps.connections.open (the app-level token), the socket (hello, then
// events_api and interactive envelopes, each waiting for its ack; an
// unacknowledged events_api envelope is sent again on the next
// connection, as Slack retries it), chat.postMessage, chat.update,
// chat.postEphemeral, conversations.open, conversations.info, users.info
// and views.open. It records what the bot sent.
type fakeSlack struct {
	t        *testing.T
	srv      *httptest.Server
	botToken string
	appToken string

	mu         sync.Mutex
	nextTS     int
	nextEnv    int
	conn       *websocket.Conn
	connWake   chan struct{}
	pending    []envelope // sent or waiting to be sent, not acknowledged
	acked      map[string]bool
	sent       []fakeMessage
	edits      []fakeMessage
	ephemerals []fakeEphemeral
	views      []fakeView
	connects   int
}

type envelope struct {
	ID      string
	Type    string // events_api or interactive
	Payload any
}

// fakeMessage is a message the bot posted or an edit of one.
type fakeMessage struct {
	Channel string
	TS      string
	Text    string // the sections' text, joined
	Top     string // the top-level (notification) text
	Blocks  string // the blocks as sent (JSON)
	Buttons []fakeButton
}

func (m fakeMessage) Body() string     { return m.Text }
func (m fakeMessage) HasButtons() bool { return len(m.Buttons) > 0 }

type fakeButton struct {
	ActionID, Label, Value, URL string
}

type fakeEphemeral struct{ Channel, User, Text string }

type fakeView struct {
	TriggerID, CallbackID, Metadata string
}

func newFakeSlack(t *testing.T) *fakeSlack {
	f := &fakeSlack{t: t, botToken: "xoxb-test-bot", appToken: "xapp-test-app", nextTS: 1, acked: map[string]bool{}, connWake: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeSlack) apiURL() string { return f.srv.URL + "/api/" }

func (f *fakeSlack) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/socket" {
		f.socket(w, r)
		return
	}
	method, ok := strings.CutPrefix(r.URL.Path, "/api/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	form := url.Values{}
	var js map[string]any
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		_ = json.Unmarshal(body, &js)
	} else {
		form, _ = url.ParseQuery(string(body))
	}
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if token == "" {
		token = form.Get("token")
	}
	want := f.botToken
	if method == "apps.connections.open" {
		want = f.appToken
	}
	if token != want {
		writeSlack(w, map[string]any{"ok": false, "error": "invalid_auth"})
		return
	}
	switch method {
	case "auth.test":
		writeSlack(w, map[string]any{"ok": true, "user": "clawguard", "user_id": "UBOT", "team": "Test team", "team_id": "T1"})
	case "apps.connections.open":
		writeSlack(w, map[string]any{"ok": true, "url": "ws" + strings.TrimPrefix(f.srv.URL, "http") + "/socket"})
	case "conversations.open":
		user := form.Get("users")
		if !isUser(user) || strings.Contains(user, ",") {
			writeSlack(w, map[string]any{"ok": false, "error": "user_not_found"})
			return
		}
		writeSlack(w, map[string]any{"ok": true, "channel": map[string]any{"id": dmOf(user)}})
	case "conversations.info":
		writeSlack(w, map[string]any{"ok": true, "channel": map[string]any{"id": form.Get("channel"), "name": "chan-" + strings.ToLower(form.Get("channel"))}})
	case "users.info":
		u := form.Get("user")
		writeSlack(w, map[string]any{"ok": true, "user": map[string]any{"id": u, "name": "u" + strings.ToLower(u), "profile": map[string]any{"display_name": "Name of " + u}}})
	case "chat.postMessage":
		m := f.message(form)
		f.mu.Lock()
		m.TS = fmt.Sprintf("1700000000.%06d", f.nextTS)
		f.nextTS++
		f.sent = append(f.sent, m)
		f.mu.Unlock()
		writeSlack(w, map[string]any{"ok": true, "channel": m.Channel, "ts": m.TS})
	case "chat.update":
		m := f.message(form)
		m.TS = form.Get("ts")
		f.mu.Lock()
		f.edits = append(f.edits, m)
		f.mu.Unlock()
		writeSlack(w, map[string]any{"ok": true, "channel": m.Channel, "ts": m.TS})
	case "chat.postEphemeral":
		f.mu.Lock()
		f.ephemerals = append(f.ephemerals, fakeEphemeral{Channel: form.Get("channel"), User: form.Get("user"), Text: form.Get("text")})
		f.mu.Unlock()
		writeSlack(w, map[string]any{"ok": true, "message_ts": "1700000000.999999"})
	case "views.open":
		view, _ := js["view"].(map[string]any)
		v := fakeView{TriggerID: fmt.Sprint(js["trigger_id"]), CallbackID: fmt.Sprint(view["callback_id"]), Metadata: fmt.Sprint(view["private_metadata"])}
		f.mu.Lock()
		f.views = append(f.views, v)
		f.mu.Unlock()
		writeSlack(w, map[string]any{"ok": true, "view": map[string]any{"id": "V1"}})
	default:
		writeSlack(w, map[string]any{"ok": false, "error": "unknown_method"})
	}
}

// dmOf is the DM channel the fake opens for a user.
func dmOf(user string) string { return "D" + user }

// message reads a posted or updated message: its sections' text and buttons.
func (f *fakeSlack) message(form url.Values) fakeMessage {
	m := fakeMessage{Channel: form.Get("channel"), Top: form.Get("text"), Blocks: form.Get("blocks")}
	var blocks []struct {
		Type string `json:"type"`
		Text struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"text"`
		Elements []struct {
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
			URL      string `json:"url"`
			Text     struct {
				Text string `json:"text"`
			} `json:"text"`
		} `json:"elements"`
	}
	if raw := form.Get("blocks"); raw != "" {
		if err := json.Unmarshal([]byte(raw), &blocks); err != nil {
			f.t.Errorf("undecodable blocks %q: %v", raw, err)
		}
	}
	var texts []string
	for _, b := range blocks {
		switch b.Type {
		case "section":
			if b.Text.Type != "plain_text" {
				f.t.Errorf("a section of type %s: cards are plain text", b.Text.Type)
			}
			if n := len([]rune(b.Text.Text)); n > 3000 {
				f.t.Errorf("a section of %d characters (Slack allows 3000)", n)
			}
			texts = append(texts, b.Text.Text)
		case "actions":
			for _, e := range b.Elements {
				m.Buttons = append(m.Buttons, fakeButton{ActionID: e.ActionID, Label: e.Text.Text, Value: e.Value, URL: e.URL})
			}
		}
	}
	m.Text = strings.Join(texts, "\n")
	if len(blocks) == 0 {
		m.Text = form.Get("text")
	}
	return m
}

func writeSlack(w http.ResponseWriter, body map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

// socket is one Socket Mode connection: hello, then every unacknowledged
// envelope in order, pings, and acks read back.
func (f *fakeSlack) socket(w http.ResponseWriter, r *http.Request) {
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	c, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer c.Close()
	var wmu sync.Mutex
	write := func(v any) error {
		wmu.Lock()
		defer wmu.Unlock()
		_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		return c.WriteJSON(v)
	}
	if err := write(map[string]any{"type": "hello", "num_connections": 1, "connection_info": map[string]any{"app_id": "A1"}}); err != nil {
		return
	}
	f.mu.Lock()
	f.connects++
	f.conn = c
	sentUpTo := 0
	f.mu.Unlock()
	done := make(chan struct{})
	go func() { // acks
		defer close(done)
		for {
			var ack struct {
				EnvelopeID string `json:"envelope_id"`
			}
			if err := c.ReadJSON(&ack); err != nil {
				return
			}
			f.mu.Lock()
			f.acked[ack.EnvelopeID] = true
			kept := f.pending[:0]
			for _, e := range f.pending {
				if e.ID != ack.EnvelopeID {
					kept = append(kept, e)
				} else {
					sentUpTo--
				}
			}
			f.pending = kept
			f.mu.Unlock()
		}
	}()
	ping := time.NewTicker(500 * time.Millisecond)
	defer ping.Stop()
	for {
		f.mu.Lock()
		var out []envelope
		if sentUpTo < len(f.pending) {
			out = append(out, f.pending[sentUpTo:]...)
			sentUpTo = len(f.pending)
		}
		wake := f.connWake
		f.mu.Unlock()
		for _, e := range out {
			if err := write(map[string]any{"type": e.Type, "envelope_id": e.ID, "payload": e.Payload, "accepts_response_payload": e.Type == "interactive"}); err != nil {
				return
			}
		}
		select {
		case <-wake:
		case <-ping.C:
			wmu.Lock()
			err := c.WriteControl(websocket.PingMessage, nil, time.Now().Add(time.Second))
			wmu.Unlock()
			if err != nil {
				return
			}
		case <-done:
			return
		case <-r.Context().Done():
			return
		}
	}
}

// push queues an envelope for the socket.
func (f *fakeSlack) push(typ string, payload any) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextEnv++
	id := fmt.Sprintf("env-%d", f.nextEnv)
	f.pending = append(f.pending, envelope{ID: id, Type: typ, Payload: payload})
	close(f.connWake)
	f.connWake = make(chan struct{})
	return id
}

// say is a user's message: in their DM with the bot when channel is "",
// else in a channel.
func (f *fakeSlack) say(user, channel, text string) {
	f.mu.Lock()
	ts := fmt.Sprintf("1710000000.%06d", f.nextTS)
	f.nextTS++
	f.mu.Unlock()
	kind := "channel"
	if channel == "" {
		channel, kind = dmOf(user), "im"
	}
	f.push("events_api", map[string]any{
		"type": "event_callback", "team_id": "T1", "api_app_id": "A1", "event_id": "Ev" + ts,
		"event": map[string]any{"type": "message", "user": user, "text": text, "channel": channel, "channel_type": kind, "ts": ts, "event_ts": ts},
	})
}

// press presses the button labelled label on message m as user.
func (f *fakeSlack) press(user string, m fakeMessage, label string) {
	f.t.Helper()
	for _, b := range m.Buttons {
		if b.Label == label {
			f.push("interactive", map[string]any{
				"type": "block_actions", "user": map[string]any{"id": user}, "trigger_id": "trigger-" + user + "-" + m.TS,
				"team": map[string]any{"id": "T1"}, "channel": map[string]any{"id": m.Channel},
				"container": map[string]any{"type": "message", "message_ts": m.TS, "channel_id": m.Channel},
				"actions":   []any{map[string]any{"type": "button", "action_id": b.ActionID, "block_id": "actions_0", "value": b.Value, "action_ts": "1"}},
			})
			return
		}
	}
	f.t.Fatalf("message %s in %s has no button %q (has %v)", m.TS, m.Channel, label, m.Buttons)
}

// submit submits the reject-reason form opened for hold.
func (f *fakeSlack) submit(user, callbackID, hold, reason string) {
	f.push("interactive", map[string]any{
		"type": "view_submission", "user": map[string]any{"id": user}, "team": map[string]any{"id": "T1"},
		"view": map[string]any{"id": "V1", "type": "modal", "callback_id": callbackID, "private_metadata": hold,
			"state": map[string]any{"values": map[string]any{"reason": map[string]any{"reason": map[string]any{"type": "plain_text_input", "value": reason}}}}},
	})
}

func (f *fakeSlack) sentTo(channel string) []fakeMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeMessage
	for _, m := range f.sent {
		if m.Channel == channel {
			out = append(out, m)
		}
	}
	return out
}

func (f *fakeSlack) cards() []fakeMessage {
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

func (f *fakeSlack) editsOf(channel, ts string) []fakeMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeMessage
	for _, m := range f.edits {
		if m.Channel == channel && m.TS == ts {
			out = append(out, m)
		}
	}
	return out
}

func (f *fakeSlack) unacked() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pending)
}

func (f *fakeSlack) openedViews() []fakeView {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeView(nil), f.views...)
}

func (f *fakeSlack) ephemeralsTo(user string) []fakeEphemeral {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeEphemeral
	for _, e := range f.ephemerals {
		if e.User == user {
			out = append(out, e)
		}
	}
	return out
}
