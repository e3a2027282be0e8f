package telegram

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clawguard/clawguard/cli/internal/bridge/bridgetest"
	"github.com/clawguard/clawguard/cli/internal/clitest"
)

func TestMain(m *testing.M) { os.Exit(clitest.Main(m)) }

// env is one test's world (bridgetest: the real server on a fresh
// database, a telegram bridge token), the fake Telegram, and a bridge that
// can be stopped and started again.
type env struct {
	*bridgetest.World
	tg      *fakeTelegram
	dataDir string

	stopBridge func()
	bridge     *Bridge
	httpAddr   string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{World: bridgetest.New(t, ChannelType), tg: newFakeTelegram(t), dataDir: filepath.Join(t.TempDir(), "bridge")}
	t.Cleanup(func() {
		if e.stopBridge != nil {
			e.stopBridge() // before the server stops (cleanups run last first)
		}
	})
	return e
}

// restartServer stops the server (SIGTERM) and starts it again on the same
// address and database.
func (e *env) restartServer(whileDown func()) {
	e.T.Helper()
	e.Srv.Stop()
	whileDown()
	e.Srv.Run(e.T)
}

// startBridge runs the bridge in process until stopBridge (a graceful stop).
func (e *env) startBridge() {
	e.T.Helper()
	cfg := Default()
	cfg.Server, cfg.Token, cfg.BotToken = e.Srv.Addr, e.BridgeToken, e.tg.token
	cfg.APIURL, cfg.DataDir, cfg.HTTPListen = e.tg.srv.URL, e.dataDir, "127.0.0.1:0"
	cfg.PollTimeout, cfg.RetryMax = time.Second, 500*time.Millisecond
	conn, err := Dial(cfg)
	if err != nil {
		e.T.Fatal(err)
	}
	log := slog.New(slog.NewJSONHandler(e.Srv.Logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b, err := New(cfg, conn, log)
	if err != nil {
		e.T.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	e.stopBridge = func() {
		cancel()
		if err := <-done; err != nil {
			e.T.Errorf("bridge Run: %v", err)
		}
		conn.Close()
		e.stopBridge = nil
	}
	hctx, hcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer hcancel()
	addr, err := b.HTTPAddr(hctx)
	if err != nil {
		e.T.Fatalf("bridge never listened: %v", err)
	}
	e.bridge, e.httpAddr = b, addr
	e.Eventually(10*time.Second, "bridge ready", func() bool { return b.notReady() == "" })
}

// user makes a Telegram user (telegram:<id>, DM = their private chat) with
// an optional role.
func (e *env) user(id int64, role, group string) string {
	e.T.Helper()
	return e.User(strconv.FormatInt(id, 10), role, group)
}

const wait = bridgetest.Wait

// card waits for the one card sent to chatID about a hold and returns it.
func (e *env) card(chatID int64, holdID string) fakeMessage {
	e.T.Helper()
	var found []fakeMessage
	e.Eventually(wait, "card for "+holdID, func() bool {
		found = found[:0]
		for _, m := range e.tg.sentTo(chatID) {
			if len(m.Buttons) > 0 && strings.Contains(m.Text, holdID) {
				found = append(found, m)
			}
		}
		return len(found) > 0
	})
	if len(found) != 1 {
		e.T.Fatalf("%d cards for %s in chat %d, want exactly 1", len(found), holdID, chatID)
	}
	return found[0]
}

// edited waits for an edit of card m containing want.
func (e *env) edited(m fakeMessage, want string) fakeMessage {
	e.T.Helper()
	var last fakeMessage
	e.Eventually(wait, fmt.Sprintf("card %d edited with %q", m.MessageID, want), func() bool {
		for _, ed := range e.tg.editsOf(m.ChatID, m.MessageID) {
			if strings.Contains(ed.Text, want) {
				last = ed
				return true
			}
		}
		return false
	})
	return last
}

// textTo waits for a message to chatID containing want.
func (e *env) textTo(chatID int64, want string) {
	e.T.Helper()
	e.Eventually(wait, fmt.Sprintf("message to %d containing %q", chatID, want), func() bool {
		for _, m := range e.tg.sentTo(chatID) {
			if strings.Contains(m.Text, want) {
				return true
			}
		}
		return false
	})
}
