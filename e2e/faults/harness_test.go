package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/clawguard/clawguard/e2e/procs"
	"github.com/clawguard/clawguard/migrations/pgtest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// repoRoot is the workspace root (tests run in e2e/faults).
const repoRoot = "../.."

var bins *procs.Bins

func TestMain(m *testing.M) {
	b, err := procs.NewBins(repoRoot)
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		os.Exit(1)
	}
	bins = b
	code := m.Run()
	b.Close()
	os.Exit(code)
}

// bin is one of the programs, built once per test binary (procs.Bins).
func bin(t *testing.T, name string) string { return bins.Path(t, name) }

// proc is one program of the system, its output in a log file.
type proc = procs.Proc

func start(t *testing.T, name string, argv ...string) *proc {
	t.Helper()
	return procs.Start(t, name, nil, 40, argv...)
}

func cleanEnv() []string { return procs.CleanEnv() }

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	procs.WaitFor(t, timeout, 100*time.Millisecond, what, cond)
}

func loopback(t *testing.T) string { return procs.Loopback(t) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// system is one Clawguard installation under test: its own Postgres cluster
// (so a test can stop it), two server replicas, runners added by the test.
type system struct {
	t         *testing.T
	pg        *pgtest.Cluster
	admin     *pgxpool.Pool // superuser: fault injection and assertions
	dbURL     string        // what the servers use: a non-superuser role, so REVOKE bites
	servers   []*proc
	addrs     []string
	metrics   []string // each server's /metrics address ("" when off)
	tokenFile string
	op        *grpc.ClientConn
	flags     []string // serve flags after the common ones (later ones win)
	opts      systemOptions
}

// systemOptions shape the installation newSystemWith starts.
type systemOptions struct {
	pg      pgtest.Options // its Postgres cluster
	metrics bool           // servers serve /metrics and /readyz on loopback
	// beforeServers runs once the database and its role exist, before the
	// servers start (a standby, a DSN naming both).
	beforeServers func(s *system)
}

// serverFlags tune the servers for a test's time budget: short leases,
// quick re-sends of unacknowledged pushes.
var serverFlags = []string{"--lease-ttl", "3s", "--push-ack-deadline", "3s", "--log-level", "info"}

func newSystem(t *testing.T, extraServerFlags ...string) *system {
	t.Helper()
	return newSystemWith(t, systemOptions{}, extraServerFlags...)
}

func newSystemWith(t *testing.T, o systemOptions, extraServerFlags ...string) *system {
	t.Helper()
	if _, err := pgtest.BinDir(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the fault suite needs Postgres server binaries: %v", err)
		}
		t.Skipf("no Postgres server binaries: %v", err)
	}
	// Short path: the cluster's unix socket lives in it.
	dir, err := os.MkdirTemp("", "cgf-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	pg, err := pgtest.StartClusterWith(ctxT(t), dir, o.pg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop() })
	s := &system{t: t, pg: pg, flags: append(append([]string{}, serverFlags...), extraServerFlags...), opts: o}
	s.admin, err = pgxpool.New(ctxT(t), pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.admin.Close)
	for _, q := range []string{`CREATE ROLE clawguard LOGIN`, `CREATE DATABASE clawguard OWNER clawguard`} {
		if _, err := s.admin.Exec(ctxT(t), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s.admin.Close()
	s.admin, err = pgxpool.New(ctxT(t), strings.Replace(pg.URL(), "/postgres?", "/clawguard?", 1))
	if err != nil {
		t.Fatal(err)
	}
	s.dbURL = fmt.Sprintf("postgres://clawguard@127.0.0.1:%d/clawguard?sslmode=disable", pg.Port)
	s.tokenFile = filepath.Join(t.TempDir(), "operator.token")
	if o.beforeServers != nil {
		o.beforeServers(s)
	}
	for i := range 2 {
		s.startServer(i)
	}
	token, err := os.ReadFile(s.tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	s.op = dial(t, s.addrs[0], strings.TrimSpace(string(token)))
	return s
}

func (s *system) startServer(i int) {
	t := s.t
	addr, metrics := loopback(t), ""
	if s.opts.metrics {
		metrics = loopback(t)
	}
	args := append([]string{bin(t, "clawguard-server"), "serve", "--database-url", s.dbURL, "--auto-migrate",
		"--listen", addr, "--metrics-listen", metrics, "--operator-token-file", s.tokenFile}, s.flags...)
	p := start(t, fmt.Sprintf("server-%d", i), args...)
	waitServing(t, p, addr, func() bool { _, err := os.Stat(s.tokenFile); return err == nil })
	s.servers = append(s.servers, p)
	s.addrs = append(s.addrs, addr)
	s.metrics = append(s.metrics, metrics)
}

// waitServing waits until the server process p answers SERVING on addr
// (and ready, when given, says so too), failing the test if p exits first.
func waitServing(t *testing.T, p *proc, addr string, ready func() bool) {
	t.Helper()
	hc := healthpb.NewHealthClient(dial(t, addr, ""))
	waitFor(t, 60*time.Second, p.Name+" SERVING", func() (bool, string) {
		if p.Exited() {
			t.Fatalf("%s exited during start:\n%s", p.Name, p.Tail(30))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return false, err.Error()
		}
		return resp.GetStatus() == healthpb.HealthCheckResponse_SERVING && (ready == nil || ready()), resp.GetStatus().String()
	})
}

// dial is a gRPC connection with a bearer token.
func dial(t *testing.T, addr, token string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(bearer(token)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (bearer) RequireTransportSecurity() bool { return false }

// ncl runs the CLI against replica 0 with the operator token.
func (s *system) ncl(args ...string) string {
	t := s.t
	t.Helper()
	cmd := exec.Command(bin(t, "ncl"), args...)
	cmd.Env = append(cleanEnv(), "CLAWGUARD_SERVER="+s.addrs[0], "CLAWGUARD_TOKEN_FILE="+s.tokenFile, "HOME="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("ncl %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return strings.TrimSpace(string(out))
}

// runner is one clawguard-runner process slot: the same id and data dir
// across restarts.
type runner struct {
	s                 *system
	id, host, dataDir string
	tokenFile, token  string
	groups            []string
	agent             string // agent binary
	script            string // the demo agent's script
	server            int    // replica it talks to
	addr              string // overrides the replica's address (a proxy in front of it)
	extra             []string
	p                 *proc
	starts            int
}

func (s *system) newRunner(id, host string, groups ...string) *runner {
	t := s.t
	secret := s.ncl("tokens", "create", "--kind", "runner", "--runner", id, "--host", host, "--name", "faults "+id, "--secret-only")
	path := filepath.Join(t.TempDir(), id+".token")
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dataDir, err := os.MkdirTemp("", "cgf-"+id+"-") // short: unix socket paths live in it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dataDir) })
	return &runner{s: s, id: id, host: host, dataDir: dataDir, tokenFile: path, token: secret, groups: groups,
		agent: bin(t, "demo-agent"), script: "[]"}
}

func (r *runner) start() {
	t := r.s.t
	t.Helper()
	addr := r.s.addrs[r.server]
	if r.addr != "" {
		addr = r.addr
	}
	argv := []string{bin(t, "clawguard-runner"), "--server", addr, "--token-file", r.tokenFile,
		"--id", r.id, "--host", r.host, "--runtime", "process", "--agent-binary", r.agent, "--data-dir", r.dataDir,
		"--log-level", "info", "--agent-env", "CLAWGUARD_DEMO_SCRIPT=" + r.script}
	for _, g := range r.groups {
		argv = append(argv, "--group", g)
	}
	argv = append(argv, r.extra...)
	r.starts++
	r.p = start(t, fmt.Sprintf("%s-%d", r.id, r.starts), argv...)
}

// conn is the runner's own gRPC identity (the test acts as the runner to
// ask the guard for agents of sessions it hosts).
func (r *runner) conn() *grpc.ClientConn { return dial(r.s.t, r.s.addrs[0], r.token) }

// session waits for the runner to host a session of group and returns its id.
func (s *system) session(group, runnerID string) string {
	var id string
	waitFor(s.t, 60*time.Second, "a session of "+group+" on "+runnerID, func() (bool, string) {
		err := s.admin.QueryRow(ctxT(s.t), `SELECT id FROM sessions WHERE agent_group_id = $1 AND runner_id = $2 AND status = 'active'`, group, runnerID).Scan(&id)
		return err == nil, fmt.Sprint(err)
	})
	return id
}

// hold asks the guard, as the runner hosting session, for a send_message
// that is held for approval (group from → to has a message policy), and
// returns the hold id.
func hold(ctx context.Context, g guardv1.GuardClient, session, from, to, text, requestID string) (string, error) {
	payload, err := structpb.NewStruct(map[string]any{"to": to, "text": text})
	if err != nil {
		return "", err
	}
	req := &guardv1.DecideRequest{
		Action:    "a2a.send",
		Actor:     &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: from, SessionId: session}}},
		Resource:  map[string]string{"from": from, "to": to},
		RequestId: requestID,
		Card: &guardv1.HoldCard{Title: "send_message", Question: "send?", Kind: "a2a_message_gate",
			DeliveryAction: "send_message", DedupKey: requestID},
	}
	req.Payload = payload
	req.Card.Payload = payload
	ctx = metadata.AppendToOutgoingContext(ctx, "x-clawguard-session", session)
	resp, err := g.Decide(ctx, req)
	if err != nil {
		return "", err
	}
	if resp.GetDecision().GetEffect() != guardv1.Effect_EFFECT_HOLD || resp.GetHoldId() == "" {
		return "", fmt.Errorf("decide = %v %q (hold error %q), want a hold", resp.GetDecision().GetEffect(), resp.GetDecision().GetReason(), resp.GetHoldError())
	}
	return resp.GetHoldId(), nil
}

// parallel runs f(i) for i in [0, n) on w workers and returns the first error.
func parallel(n, w int, f func(i int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  = make(chan int)
	)
	for range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

// events reads the demo agent's events.jsonl lines of one session.
func (r *runner) events(session string) []map[string]any {
	b, _ := os.ReadFile(filepath.Join(r.dataDir, "sessions", session, "events.jsonl"))
	var out []map[string]any
	for _, line := range strings.Split(string(b), "\n") {
		var ev map[string]any
		if json.Unmarshal([]byte(line), &ev) == nil {
			out = append(out, ev)
		}
	}
	return out
}
