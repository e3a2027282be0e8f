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

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/cli/internal/clitest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

func TestMain(m *testing.M) { os.Exit(clitest.Main(m)) }

// env is one test's world: the real server on a fresh database, the fake
// Slack, and a bridge that can be stopped and started again.
type env struct {
	t        *testing.T
	srv      *clitest.Server
	db       *pgxpool.Pool
	op       *grpc.ClientConn
	sl       *fakeSlack
	dataDir  string
	bridgeTk string

	stopBridge func()
	bridge     *Bridge
	httpAddr   string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	srv := clitest.Start(t)
	e := &env{t: t, srv: srv, sl: newFakeSlack(t), dataDir: filepath.Join(t.TempDir(), "bridge")}
	t.Cleanup(func() {
		if e.stopBridge != nil {
			e.stopBridge() // before the server stops (cleanups run last first)
		}
	})
	e.op = srv.Operator(t)
	e.db = srv.DB(t)
	e.bridgeTk = srv.Token(t, &guardv1.CreateTokenRequest{
		Kind: guardv1.Principal_PRINCIPAL_BRIDGE, Name: "slack", Channels: []string{"slack"}})
	// A live runner, so sessions opened for routed messages are placed.
	e.exec(`INSERT INTO runners (id, host, lease_expires_at) VALUES ('r1', 'h1', now() + interval '1 hour')`)
	return e
}

func (e *env) config() Config {
	cfg := Default()
	cfg.Server, cfg.Token, cfg.BotToken, cfg.AppToken = e.srv.Addr, e.bridgeTk, e.sl.botToken, e.sl.appToken
	cfg.APIURL, cfg.DataDir, cfg.HTTPListen = e.sl.apiURL(), e.dataDir, "127.0.0.1:0"
	cfg.RetryMax = 500 * time.Millisecond
	return cfg
}

// startBridge runs the bridge in process until stopBridge (a graceful stop).
func (e *env) startBridge() {
	e.t.Helper()
	cfg := e.config()
	conn, err := Dial(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	log := slog.New(slog.NewJSONHandler(e.srv.Logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
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
	e.eventually(10*time.Second, "bridge ready", func() bool { return b.NotReady() == "" })
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

// user makes a Slack user (slack:<id>, DM addressed by the same id) with an
// optional role.
func (e *env) user(handle, role, group string) string {
	e.t.Helper()
	uid := "slack:" + handle
	e.exec(`INSERT INTO users (id) VALUES ($1) ON CONFLICT DO NOTHING`, uid)
	e.exec(`INSERT INTO user_dms (user_id, channel_type, address) VALUES ($1, 'slack', $2) ON CONFLICT DO NOTHING`, uid, handle)
	if role != "" {
		e.exec(`INSERT INTO user_roles (user_id, role, agent_group_id) VALUES ($1, $2, NULLIF($3, ''))`, uid, role, group)
	}
	return uid
}

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
	return e.srv.Dial(e.t, tok.GetSecret())
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

// card waits for the one card sent to a user's DM about a hold.
func (e *env) card(user, holdID string) fakeMessage {
	e.t.Helper()
	var found []fakeMessage
	e.eventually(wait, "card for "+holdID, func() bool {
		found = found[:0]
		for _, m := range e.sl.sentTo(dmOf(user)) {
			if len(m.Buttons) > 0 && strings.Contains(m.Text, holdID) {
				found = append(found, m)
			}
		}
		return len(found) > 0
	})
	if len(found) != 1 {
		e.t.Fatalf("%d cards for %s in %s's DM, want exactly 1", len(found), holdID, user)
	}
	return found[0]
}

// edited waits for an edit of card m containing want.
func (e *env) edited(m fakeMessage, want string) fakeMessage {
	e.t.Helper()
	var last fakeMessage
	e.eventually(wait, fmt.Sprintf("card %s edited with %q", m.TS, want), func() bool {
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
	e.t.Helper()
	var got fakeMessage
	e.eventually(wait, fmt.Sprintf("message to %s containing %q", channel, want), func() bool {
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

func (e *env) holdOf(kind string) string {
	e.t.Helper()
	var id string
	e.eventually(wait, "a "+kind+" hold", func() bool {
		err := e.db.QueryRow(context.Background(), `SELECT id FROM holds WHERE kind = $1 ORDER BY created_at DESC LIMIT 1`, kind).Scan(&id)
		return err == nil
	})
	return id
}

func (e *env) holdStatus(id string) string {
	return e.str(`SELECT status FROM holds WHERE id = $1`, id)
}

// requestFor files a sessionless hold only user may resolve and returns its id.
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
