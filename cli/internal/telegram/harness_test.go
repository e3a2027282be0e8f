package telegram

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/cli/internal/clitest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

func TestMain(m *testing.M) { os.Exit(clitest.Main(m)) }

// env is one test's world: the real server on a fresh database, the fake
// Telegram, and a bridge that can be stopped and started again.
type env struct {
	t        *testing.T
	srv      *clitest.Server // the real server; the bridge logs next to it
	db       *pgxpool.Pool
	op       *grpc.ClientConn
	tg       *fakeTelegram
	dataDir  string
	bridgeTk string

	stopBridge func()
	bridge     *Bridge
	httpAddr   string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	srv := clitest.Start(t)
	e := &env{t: t, srv: srv, tg: newFakeTelegram(t), dataDir: filepath.Join(t.TempDir(), "bridge")}
	t.Cleanup(func() {
		if e.stopBridge != nil {
			e.stopBridge() // before the server stops (cleanups run last first)
		}
	})
	e.op = srv.Operator(t)
	e.db = srv.DB(t)
	e.bridgeTk = srv.Token(t, &guardv1.CreateTokenRequest{
		Kind: guardv1.Principal_PRINCIPAL_BRIDGE, Name: "telegram", Channels: []string{"telegram"}})
	// A live runner, so sessions opened for routed messages are placed.
	e.exec(`INSERT INTO runners (id, host, lease_expires_at) VALUES ('r1', 'h1', now() + interval '1 hour')`)
	return e
}

// restartServer stops the server (SIGTERM) and starts it again on the same
// address and database.
func (e *env) restartServer(whileDown func()) {
	e.t.Helper()
	e.srv.Stop()
	whileDown()
	e.srv.Run(e.t)
}

func (e *env) conn(token string) *grpc.ClientConn {
	return e.srv.Dial(e.t, token)
}

// startBridge runs the bridge in process until stopBridge (a graceful stop).
func (e *env) startBridge() {
	e.t.Helper()
	cfg := Default()
	cfg.Server, cfg.Token, cfg.BotToken = e.srv.Addr, e.bridgeTk, e.tg.token
	cfg.APIURL, cfg.DataDir, cfg.HTTPListen = e.tg.srv.URL, e.dataDir, "127.0.0.1:0"
	cfg.PollTimeout, cfg.RetryMax = time.Second, 500*time.Millisecond
	conn, err := Dial(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	log := slog.New(slog.NewJSONHandler(io.MultiWriter(e.srv.Logs), &slog.HandlerOptions{Level: slog.LevelDebug}))
	b, err := New(cfg, conn, log)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	e.stopBridge = func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("bridge Run: %v", err)
		}
		conn.Close()
		e.stopBridge = nil
	}
	hctx, hcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer hcancel()
	addr, err := b.HTTPAddr(hctx)
	if err != nil {
		e.t.Fatalf("bridge never listened: %v", err)
	}
	e.bridge, e.httpAddr = b, addr
	e.eventually(10*time.Second, "bridge ready", func() bool { return b.notReady() == "" })
}

func (e *env) exec(sql string, args ...any) {
	e.t.Helper()
	if _, err := e.db.Exec(context.Background(), sql, args...); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
}

func (e *env) str(sql string, args ...any) string {
	e.t.Helper()
	var s string
	if err := e.db.QueryRow(context.Background(), sql, args...).Scan(&s); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	return s
}

// user makes a Telegram user (telegram:<id>, DM = their private chat) with
// an optional role.
func (e *env) user(id int64, role, group string) string {
	e.t.Helper()
	uid := userID(id)
	e.exec(`INSERT INTO users (id) VALUES ($1) ON CONFLICT DO NOTHING`, uid)
	e.exec(`INSERT INTO user_dms (user_id, channel_type, address) VALUES ($1, 'telegram', $2) ON CONFLICT DO NOTHING`, uid, fmt.Sprint(id))
	if role != "" {
		e.exec(`INSERT INTO user_roles (user_id, role, agent_group_id) VALUES ($1, $2, NULLIF($3, ''))`, uid, role, group)
	}
	return uid
}

// pushes are the push bodies of a kind stored for a group's sessions.
func (e *env) pushes(groupID, kind string) []*guardv1.Push {
	e.t.Helper()
	rows, err := e.db.Query(context.Background(), `SELECT p.body FROM runner_pushes p JOIN sessions s ON s.id = p.session_id
		WHERE s.agent_group_id = $1 AND p.kind = $2 ORDER BY p.created_at`, groupID, kind)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	var out []*guardv1.Push
	for rows.Next() {
		var body []byte
		if err := rows.Scan(&body); err != nil {
			e.t.Fatal(err)
		}
		p := &guardv1.Push{}
		if err := proto.Unmarshal(body, p); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// asAgent is the runner r1 speaking for one of its sessions.
func (e *env) asAgent(session string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "x-clawguard-session", session)
}

func (e *env) runnerConn() *grpc.ClientConn {
	e.t.Helper()
	tok, err := guardv1.NewRegistryClient(e.op).CreateToken(context.Background(), &guardv1.CreateTokenRequest{
		Kind: guardv1.Principal_PRINCIPAL_RUNNER, Name: "r1", RunnerId: "r1"})
	if err != nil {
		e.t.Fatal(err)
	}
	return e.conn(tok.GetSecret())
}

// eventually polls cond until it holds or the deadline passes.
func (e *env) eventually(d time.Duration, what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
	}
}

const wait = 15 * time.Second

// card waits for the one card sent to chatID about a hold and returns it.
func (e *env) card(chatID int64, holdID string) fakeMessage {
	e.t.Helper()
	var found []fakeMessage
	e.eventually(wait, "card for "+holdID, func() bool {
		found = found[:0]
		for _, m := range e.tg.sentTo(chatID) {
			if len(m.Buttons) > 0 && strings.Contains(m.Text, holdID) {
				found = append(found, m)
			}
		}
		return len(found) > 0
	})
	if len(found) != 1 {
		e.t.Fatalf("%d cards for %s in chat %d, want exactly 1", len(found), holdID, chatID)
	}
	return found[0]
}

// edited waits for an edit of card m containing want.
func (e *env) edited(m fakeMessage, want string) fakeMessage {
	e.t.Helper()
	var last fakeMessage
	e.eventually(wait, fmt.Sprintf("card %d edited with %q", m.MessageID, want), func() bool {
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
	e.t.Helper()
	e.eventually(wait, fmt.Sprintf("message to %d containing %q", chatID, want), func() bool {
		for _, m := range e.tg.sentTo(chatID) {
			if strings.Contains(m.Text, want) {
				return true
			}
		}
		return false
	})
}

// requestFor files a sessionless hold only user may resolve (a credential
// gateway's kind) and returns its id.
func (e *env) requestFor(user, title string) string {
	e.t.Helper()
	resp, err := guardv1.NewApprovalsClient(e.op).Request(context.Background(), &guardv1.RequestRequest{
		Kind: "onecli_credential", Card: &guardv1.HoldCard{Title: title},
		ApproverRule: &guardv1.ApproverRule{Kind: &guardv1.ApproverRule_Exclusive{Exclusive: &guardv1.ExclusiveApprover{UserId: user}}},
	})
	if err != nil {
		e.t.Fatalf("Approvals.Request: %v", err)
	}
	return resp.GetHold().GetId()
}
