package telegram

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
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

	bridge   *Bridge
	httpAddr string
	console  string // --console-url ("" = none)
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return &env{World: bridgetest.New(t, ChannelType), tg: newFakeTelegram(t), dataDir: filepath.Join(t.TempDir(), "bridge")}
}

// restartServer stops the server (SIGTERM) and starts it again on the same
// address and database.
func (e *env) restartServer(whileDown func()) {
	e.T.Helper()
	e.Srv.Stop()
	whileDown()
	e.Srv.Run(e.T)
}

// startBridge runs the bridge in process until StopBridge (a graceful stop).
func (e *env) startBridge() {
	e.T.Helper()
	cfg := Default()
	cfg.Server, cfg.Token, cfg.BotToken = e.Srv.Addr, e.BridgeToken, e.tg.token
	cfg.APIURL, cfg.DataDir, cfg.HTTPListen = e.tg.srv.URL, e.dataDir, "127.0.0.1:0"
	cfg.PollTimeout, cfg.RetryMax = time.Second, 500*time.Millisecond
	cfg.ConsoleURL = e.console
	conn, err := Dial(cfg)
	if err != nil {
		e.T.Fatal(err)
	}
	b, err := New(cfg, conn, e.Log())
	if err != nil {
		e.T.Fatal(err)
	}
	e.bridge, e.httpAddr = b, e.StartBridge(b, conn, b.notReady)
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
	return bridgetest.Card(e.World, holdID, func() []fakeMessage { return e.tg.sentTo(chatID) })
}

// edited waits for an edit of card m containing want.
func (e *env) edited(m fakeMessage, want string) fakeMessage {
	e.T.Helper()
	return bridgetest.Containing(e.World, fmt.Sprintf("card %d edited", m.MessageID), want,
		func() []fakeMessage { return e.tg.editsOf(m.ChatID, m.MessageID) })
}

// textTo waits for a message to chatID containing want.
func (e *env) textTo(chatID int64, want string) {
	e.T.Helper()
	bridgetest.Containing(e.World, fmt.Sprintf("message to %d", chatID), want, func() []fakeMessage { return e.tg.sentTo(chatID) })
}
