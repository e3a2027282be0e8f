package slack

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clawguard/clawguard/cli/internal/bridge/bridgetest"
	"github.com/clawguard/clawguard/cli/internal/clitest"
)

func TestMain(m *testing.M) { os.Exit(clitest.Main(m)) }

// env is one test's world (bridgetest: the real server on a fresh
// database, a slack bridge token), the fake Slack, and a bridge that can be
// stopped and started again.
type env struct {
	*bridgetest.World
	sl      *fakeSlack
	dataDir string

	stopBridge func()
	bridge     *Bridge
	httpAddr   string
}

const wait = bridgetest.Wait

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{World: bridgetest.New(t, ChannelType), sl: newFakeSlack(t), dataDir: filepath.Join(t.TempDir(), "bridge")}
	t.Cleanup(func() {
		if e.stopBridge != nil {
			e.stopBridge() // before the server stops (cleanups run last first)
		}
	})
	return e
}

func (e *env) config() Config {
	cfg := Default()
	cfg.Server, cfg.Token, cfg.BotToken, cfg.AppToken = e.Srv.Addr, e.BridgeToken, e.sl.botToken, e.sl.appToken
	cfg.APIURL, cfg.DataDir, cfg.HTTPListen = e.sl.apiURL(), e.dataDir, "127.0.0.1:0"
	cfg.RetryMax = 500 * time.Millisecond
	return cfg
}

// startBridge runs the bridge in process until stopBridge (a graceful stop).
func (e *env) startBridge() {
	e.T.Helper()
	cfg := e.config()
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
	e.Eventually(10*time.Second, "bridge ready", func() bool { return b.NotReady() == "" })
}

// card waits for the one card sent to a user's DM about a hold.
func (e *env) card(user, holdID string) fakeMessage {
	e.T.Helper()
	var found []fakeMessage
	e.Eventually(wait, "card for "+holdID, func() bool {
		found = found[:0]
		for _, m := range e.sl.sentTo(dmOf(user)) {
			if len(m.Buttons) > 0 && strings.Contains(m.Text, holdID) {
				found = append(found, m)
			}
		}
		return len(found) > 0
	})
	if len(found) != 1 {
		e.T.Fatalf("%d cards for %s in %s's DM, want exactly 1", len(found), holdID, user)
	}
	return found[0]
}

// edited waits for an edit of card m containing want.
func (e *env) edited(m fakeMessage, want string) fakeMessage {
	e.T.Helper()
	var last fakeMessage
	e.Eventually(wait, fmt.Sprintf("card %s edited with %q", m.TS, want), func() bool {
		for _, ed := range e.sl.editsOf(m.Channel, m.TS) {
			if strings.Contains(ed.Text, want) {
				last = ed
				return true
			}
		}
		return false
	})
	return last
}

// textTo waits for a message to a channel containing want.
func (e *env) textTo(channel, want string) fakeMessage {
	e.T.Helper()
	var got fakeMessage
	e.Eventually(wait, fmt.Sprintf("message to %s containing %q", channel, want), func() bool {
		for _, m := range e.sl.sentTo(channel) {
			if strings.Contains(m.Text, want) {
				got = m
				return true
			}
		}
		return false
	})
	return got
}
