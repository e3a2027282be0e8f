package telegram

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/migrations/pgtest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	if serverBinDir != "" {
		_ = os.RemoveAll(serverBinDir)
	}
	os.Exit(code)
}

var (
	buildOnce    sync.Once
	serverBin    string
	serverBinDir string
	buildErr     error
)

// buildServer builds clawguard-server from this tree once per test binary.
func buildServer(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		serverBinDir, buildErr = os.MkdirTemp("", "telegram-e2e-")
		if buildErr != nil {
			return
		}
		serverBin = filepath.Join(serverBinDir, "clawguard-server")
		out, err := exec.Command("go", "build", "-o", serverBin, "github.com/clawguard/clawguard/server/cmd/clawguard-server").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("build clawguard-server: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return serverBin
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// env is one test's world: the real server on a fresh database, the fake
// Telegram, and a bridge that can be stopped and started again.
type env struct {
	t        *testing.T
	addr     string
	db       *pgxpool.Pool
	op       *grpc.ClientConn
	tg       *fakeTelegram
	dataDir  string
	bridgeTk string
	logs     *syncBuffer

	stopBridge  func()
	startServer func()
	stopServer  func()
	tokenFile   string
	bridge      *Bridge
	httpAddr    string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	dbURL := pgtest.NewEmptyDB(t)
	e := &env{t: t, addr: freeAddr(t), tg: newFakeTelegram(t), dataDir: filepath.Join(dir, "bridge"), logs: &syncBuffer{}}
	tokenFile := filepath.Join(dir, "operator.token")
	e.tokenFile = tokenFile
	e.startServer = func() {
		ctx, cancel := context.WithCancel(context.Background())
		cmd := exec.CommandContext(ctx, buildServer(t), "serve", "--database-url", dbURL, "--auto-migrate",
			"--listen", e.addr, "--metrics-listen", "", "--operator-token-file", tokenFile, "--shutdown-timeout", "1s")
		cmd.Stdout, cmd.Stderr = e.logs, e.logs
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		cmd.WaitDelay = 10 * time.Second
		if err := cmd.Start(); err != nil {
			t.Fatalf("start server: %v", err)
		}
		e.stopServer = func() { cancel(); _ = cmd.Wait() }
	}
	e.startServer()
	t.Cleanup(func() {
		if e.stopBridge != nil {
			e.stopBridge()
		}
		e.stopServer()
		if t.Failed() {
			t.Logf("server and bridge log:\n%s", e.logs.String())
		}
	})
	e.waitServing(tokenFile)
	opToken, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	e.op = e.conn(strings.TrimSpace(string(opToken)))
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e.db = pool
	tok, err := guardv1.NewRegistryClient(e.op).CreateToken(context.Background(), &guardv1.CreateTokenRequest{
		Kind: guardv1.Principal_PRINCIPAL_BRIDGE, Name: "telegram", Channels: []string{"telegram"}})
	if err != nil {
		t.Fatalf("create bridge token: %v", err)
	}
	e.bridgeTk = tok.GetSecret()
	// A live runner, so sessions opened for routed messages are placed.
	e.exec(`INSERT INTO runners (id, host, lease_expires_at) VALUES ('r1', 'h1', now() + interval '1 hour')`)
	return e
}

// restartServer stops the server (SIGTERM) and starts it again on the same
// address and database.
func (e *env) restartServer(whileDown func()) {
	e.t.Helper()
	e.stopServer()
	whileDown()
	e.startServer()
	e.waitServing(e.tokenFile)
}

func (e *env) waitServing(tokenFile string) {
	e.t.Helper()
	conn, err := grpc.NewClient(e.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	e.eventually(60*time.Second, "server SERVING", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		_, ferr := os.Stat(tokenFile)
		return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING && ferr == nil
	})
}

func (e *env) conn(token string) *grpc.ClientConn {
	c, err := grpc.NewClient(e.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(bearer{token: token}))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	return c
}

// startBridge runs the bridge in process until stopBridge (a graceful stop).
func (e *env) startBridge() {
	e.t.Helper()
	cfg := Default()
	cfg.Server, cfg.Token, cfg.BotToken = e.addr, e.bridgeTk, e.tg.token
	cfg.APIURL, cfg.DataDir, cfg.HTTPListen = e.tg.srv.URL, e.dataDir, "127.0.0.1:0"
	cfg.PollTimeout, cfg.RetryMax = time.Second, 500*time.Millisecond
	conn, err := Dial(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	log := slog.New(slog.NewJSONHandler(io.MultiWriter(e.logs), &slog.HandlerOptions{Level: slog.LevelDebug}))
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

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
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
