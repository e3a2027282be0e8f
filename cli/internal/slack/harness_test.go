package slack

import (
	"os"
	"path/filepath"
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

	bridge   *Bridge
	httpAddr string
	console  string // --console-url ("" = none)
}

const wait = bridgetest.Wait

func newEnv(t *testing.T) *env {
	t.Helper()
	return &env{World: bridgetest.New(t, ChannelType), sl: newFakeSlack(t), dataDir: filepath.Join(t.TempDir(), "bridge")}
}

func (e *env) config() Config {
	cfg := Default()
	cfg.Server, cfg.Token, cfg.BotToken, cfg.AppToken = e.Srv.Addr, e.BridgeToken, e.sl.botToken, e.sl.appToken
	cfg.APIURL, cfg.DataDir, cfg.HTTPListen = e.sl.apiURL(), e.dataDir, "127.0.0.1:0"
	cfg.RetryMax = 500 * time.Millisecond
	cfg.ConsoleURL = e.console
	return cfg
}

// startBridge runs the bridge in process until StopBridge (a graceful stop).
func (e *env) startBridge() {
	e.T.Helper()
	cfg := e.config()
	conn, err := Dial(cfg)
	if err != nil {
		e.T.Fatal(err)
	}
	b, err := New(cfg, conn, e.Log())
	if err != nil {
		e.T.Fatal(err)
	}
	e.bridge, e.httpAddr = b, e.StartBridge(b, conn, b.NotReady)
}

// card waits for the one card sent to a user's DM about a hold.
func (e *env) card(user, holdID string) fakeMessage {
	e.T.Helper()
	return bridgetest.Card(e.World, holdID, func() []fakeMessage { return e.sl.sentTo(dmOf(user)) })
}

// edited waits for an edit of card m containing want.
func (e *env) edited(m fakeMessage, want string) fakeMessage {
	e.T.Helper()
	return bridgetest.Containing(e.World, "card "+m.TS+" edited", want, func() []fakeMessage { return e.sl.editsOf(m.Channel, m.TS) })
}

// textTo waits for a message to a channel containing want.
func (e *env) textTo(channel, want string) fakeMessage {
	e.T.Helper()
	return bridgetest.Containing(e.World, "message to "+channel, want, func() []fakeMessage { return e.sl.sentTo(channel) })
}
