// Package e2e runs the runner against the real server binary, real Postgres
// and (for the container tests) the real Docker daemon. TestMain builds the
// server and the demo agent; each test gets a fresh database, its own server
// process and an in-process runner.
package e2e

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/clawguard/clawguard/migrations/pgtest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/app"
	"github.com/clawguard/clawguard/runner/internal/config"
	"github.com/clawguard/clawguard/runner/internal/gateway"
	"github.com/clawguard/clawguard/runner/internal/runtime/docker"
	"github.com/clawguard/clawguard/runner/internal/runtime/runtimetest"
	"github.com/clawguard/clawguard/runner/internal/sessions"
)

var (
	bins       string // dir holding clawguard-server and demo-agent
	demoImage  = "clawguard-agent-demo:e2e"
	dockerErr  error // nil when the demo image was built
	serverBin  string
	demoAgent  string
	mcpBin     string // clawguard-mcp, also in the demo image at docker.MCPBinaryPath
	quietAgent string // an agent that only waits (it reads no inbox): the runtime tests' sleeper
	// egressClient is Go's net/http client with HTTPS_PROXY, run in agent containers.
	egressClient string
	buildOutput  string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cg-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins = dir
	serverBin = filepath.Join(dir, "clawguard-server")
	demoAgent = filepath.Join(dir, "demo-agent")
	mcpBin = filepath.Join(dir, "clawguard-mcp")
	quietAgent = filepath.Join(dir, "quiet-agent")
	egressClient = filepath.Join(dir, "egressclient")
	for _, b := range []struct{ out, pkg string }{
		{serverBin, "github.com/clawguard/clawguard/server/cmd/clawguard-server"},
		{demoAgent, "github.com/clawguard/clawguard/runner/agent/demo"},
		{mcpBin, "github.com/clawguard/clawguard/runner/cmd/clawguard-mcp"},
		{filepath.Join(dir, "clawguard-init"), "github.com/clawguard/clawguard/runner/cmd/clawguard-init"},
		{filepath.Join(dir, "egressclient"), "github.com/clawguard/clawguard/runner/internal/e2e/testdata/egressclient"},
		{filepath.Join(dir, "sdkclient"), "github.com/clawguard/clawguard/runner/internal/modelgw/testdata/sdkclient"},
		{filepath.Join(dir, "llm-agent"), "github.com/clawguard/clawguard/runner/agent/llm"},
	} {
		cmd := exec.Command("go", "build", "-trimpath", "-o", b.out, b.pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", b.pkg, err, out)
			os.Exit(1)
		}
	}
	if err := runtimetest.BuildSleeperTo(quietAgent); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dockerErr = buildDemoImage()
	code := pgtest.Main(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

func buildDemoImage() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := docker.New(ctx, docker.Config{InstallID: "e2e-build"})
	if err != nil {
		return err
	}
	defer r.Close()
	return r.BuildAgentBase(ctx, docker.BaseImage{Agent: demoAgent, MCP: mcpBin, Tag: demoImage})
}

func needDocker(t *testing.T) {
	t.Helper()
	if dockerErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("docker: %v", dockerErr)
		}
		t.Skipf("docker not available: %v", dockerErr)
	}
}

// server is one clawguard-server process on a fresh database.
type server struct {
	db      string // database URL
	addr    string
	opToken string
	op      clients
	conn    *grpc.ClientConn
	stop    func() // stops the server process (idempotent)
	cert    *testCert
}

type clients struct {
	guard     guardv1.GuardClient
	approvals guardv1.ApprovalsClient
	registry  guardv1.RegistryClient
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func startServer(t *testing.T) *server { return startServerTLS(t, nil) }

// startServerTLS starts the server; with a certificate it serves TLS only.
func startServerTLS(t *testing.T, cert *testCert) *server {
	t.Helper()
	return startServerOn(t, pgtest.NewDB(t), cert, "")
}

// startServerOn starts a server on database db, with extra flags. A
// replica of a server already serving db is given its operator token
// (replicas share the one operator secret: each start registers its file's).
func startServerOn(t *testing.T, db string, cert *testCert, opToken string, extra ...string) *server {
	t.Helper()
	dir := t.TempDir()
	s := &server{db: db, addr: freeAddr(t), cert: cert}
	tokFile := filepath.Join(dir, "operator.token")
	if opToken != "" {
		if err := os.WriteFile(tokFile, []byte(opToken+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	args := []string{"serve", "--database-url", db, "--listen", s.addr,
		"--metrics-listen", "", "--auto-migrate", "--operator-token-file", tokFile, "--log-level", "warn", "--shutdown-timeout", "2s"}
	if cert != nil {
		args = append(args, "--tls-cert", cert.certFile, "--tls-key", cert.keyFile)
	}
	args = append(args, extra...)
	cmd := exec.CommandContext(ctx, serverBin, args...)
	logf, _ := os.Create(filepath.Join(dir, "server.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	s.stop = func() { once.Do(func() { cancel(); cmd.Wait() }) }
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("server log:\n%s", tail(string(b), 4000))
		}
	})
	waitFor(t, 20*time.Second, "operator token file", func() bool {
		b, err := os.ReadFile(tokFile)
		s.opToken = strings.TrimSpace(string(b))
		return err == nil && s.opToken != ""
	})
	s.conn = dial(t, s.addr, s.opToken, cert)
	s.op = clients{guardv1.NewGuardClient(s.conn), guardv1.NewApprovalsClient(s.conn), guardv1.NewRegistryClient(s.conn)}
	waitFor(t, 20*time.Second, "server answering", func() bool {
		_, err := s.op.registry.ListGroups(context.Background(), &guardv1.ListGroupsRequest{})
		return err == nil
	})
	return s
}

type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (bearer) RequireTransportSecurity() bool { return false }

func dial(t *testing.T, addr, token string, cert *testCert) *grpc.ClientConn {
	creds := insecure.NewCredentials()
	if cert != nil {
		creds = credentials.NewTLS(&tls.Config{RootCAs: cert.pool})
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds), grpc.WithPerRPCCredentials(bearer(token)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func (s *server) group(t *testing.T, name string, scope guardv1.CliScope) string {
	t.Helper()
	resp, err := s.op.registry.CreateGroup(context.Background(), &guardv1.CreateGroupRequest{Name: name, CliScope: scope})
	if err != nil {
		t.Fatalf("create group %s: %v", name, err)
	}
	return resp.GetGroup().GetId()
}

// owner creates a user with a global owner role (the approver of last resort).
func (s *server) owner(t *testing.T, id string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := s.op.registry.CreateUser(ctx, &guardv1.CreateUserRequest{Id: id}); err != nil {
		t.Fatalf("create user: %v", err)
	}
	if _, err := s.op.registry.GrantRole(ctx, &guardv1.GrantRoleRequest{UserId: id, Role: guardv1.Role_ROLE_OWNER, Scope: guardv1.RoleScope_ROLE_SCOPE_GLOBAL}); err != nil {
		t.Fatalf("grant owner: %v", err)
	}
	return id
}

func (s *server) approve(t *testing.T, holdID, asUser string) {
	t.Helper()
	if _, err := s.op.approvals.Resolve(context.Background(), &guardv1.ResolveRequest{Id: holdID, Outcome: guardv1.Outcome_OUTCOME_APPROVE, AsUser: asUser}); err != nil {
		t.Fatalf("approve %s as %s: %v", holdID, asUser, err)
	}
}

// runner is an in-process runner.
type runner struct {
	*app.Runner
	dataDir string
	logFile string
	done    chan error
}

type runnerOpts struct {
	runtime    string // "process" (default) or "docker"
	groups     []string
	script     any // the demo agent's CLAWGUARD_DEMO_SCRIPT
	decideWait time.Duration
	noRun      bool // build the runner but don't start it
	// agentBinary replaces the demo agent under the process runtime.
	agentBinary string
	// Host-wide container caps (--container-cpus / --container-memory).
	containerCPUs, containerMemory string
	// ackDeadline is --inbox-ack-deadline (0: the default).
	ackDeadline time.Duration
	// serverAddr is where the runner dials the server ("": the server's
	// own address; a wire-counting proxy in front of it otherwise).
	serverAddr string
	// gateway are the sessions' gateway limits (zero: the defaults).
	gateway gateway.Limits
	// egressAllow are the ranges opened to agents (--egress-allow-cidr);
	// egressHoldWait is --egress-hold-wait (0: the default); caFile is
	// --agent-ca-file ("": none, the image's own).
	egressAllow    []string
	egressHoldWait time.Duration
	caFile         string
	// metricsListen is --metrics-listen ("": off); egressDNS --egress-dns.
	metricsListen, egressDNS string
	// modelCAFile is --model-ca-file; modelHoldWait --model-hold-wait (0:
	// the default).
	modelCAFile   string
	modelHoldWait time.Duration
}

func (s *server) startRunner(t *testing.T, o runnerOpts) *runner {
	t.Helper()
	id := fmt.Sprintf("e2e-%d", time.Now().UnixNano()%1e9)
	resp, err := s.op.registry.CreateToken(context.Background(), &guardv1.CreateTokenRequest{Kind: guardv1.Principal_PRINCIPAL_RUNNER, Name: id, RunnerId: id})
	if err != nil {
		t.Fatalf("runner token: %v", err)
	}
	dataDir, err := os.MkdirTemp("", "cge") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dataDir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dataDir) })
	tokFile := filepath.Join(dataDir, "runner.token")
	if err := os.WriteFile(tokFile, []byte(resp.GetSecret()), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Server, cfg.TokenFile, cfg.ID, cfg.DataDir = s.addr, tokFile, id, dataDir
	if o.serverAddr != "" {
		cfg.Server = o.serverAddr
	}
	if o.gateway != (gateway.Limits{}) {
		cfg.Gateway = o.gateway
	}
	cfg.Groups = o.groups
	cfg.DecideWait = 10 * time.Second
	if o.decideWait > 0 {
		cfg.DecideWait = o.decideWait
	}
	cfg.Runtime = o.runtime
	if o.ackDeadline > 0 {
		cfg.InboxAckDeadline = o.ackDeadline
	}
	cfg.ContainerCPUs, cfg.ContainerMemory = o.containerCPUs, o.containerMemory
	if cfg.Runtime == "" {
		cfg.Runtime = "process"
	}
	cfg.AgentBinary, cfg.AgentImage = demoAgent, demoImage
	cfg.Tools.Dir, cfg.Tools.CAFile = bins, "none"
	if o.caFile != "" {
		cfg.Tools.CAFile = o.caFile
	}
	cfg.Egress.AllowCIDRs = o.egressAllow
	cfg.MetricsListen, cfg.Egress.DNS = o.metricsListen, o.egressDNS
	if o.egressHoldWait > 0 {
		cfg.Egress.Limits.HoldWait = o.egressHoldWait
	}
	cfg.Models.CAFile = o.modelCAFile
	if o.modelHoldWait > 0 {
		cfg.Models.Limits.HoldWait = o.modelHoldWait
	}
	if o.agentBinary != "" {
		cfg.AgentBinary = o.agentBinary
	}
	if s.cert != nil {
		cfg.TLSCA = s.cert.certFile
	}
	script := o.script
	if script == nil {
		script = []any{}
	}
	b, _ := json.Marshal(script)
	cfg.AgentEnv = map[string]string{"CLAWGUARD_DEMO_SCRIPT": string(b)}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	logf, _ := os.Create(filepath.Join(t.TempDir(), "runner.log"))
	log := slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithCancel(context.Background())
	r, err := app.New(ctx, cfg, log)
	if err != nil {
		cancel()
		t.Fatalf("runner: %v", err)
	}
	rn := &runner{Runner: r, dataDir: dataDir, logFile: logf.Name(), done: make(chan error, 1)}
	if o.noRun {
		t.Cleanup(func() { cancel(); r.Conn.Close() })
		return rn
	}
	go func() { rn.done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-rn.done:
		case <-time.After(40 * time.Second):
			t.Error("runner did not stop")
		}
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("runner log:\n%s", tail(string(b), 8000))
		}
	})
	return rn
}

// session waits for the runner's session of group.
func (r *runner) session(t *testing.T, group string) *sessions.Session {
	t.Helper()
	var found *sessions.Session
	waitFor(t, 30*time.Second, "session of "+group, func() bool {
		for _, s := range r.Sessions.List() {
			if s.GroupID == group {
				found = s
				return true
			}
		}
		select {
		case err := <-r.done:
			t.Fatalf("runner stopped: %v", err)
		default:
		}
		return false
	})
	return found
}

// event is one line of a demo agent's events.jsonl.
type event map[string]any

func (e event) s(k string) string { v, _ := e[k].(string); return v }

func events(dir string) []event {
	f, err := os.Open(filepath.Join(dir, "events.jsonl"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			out = append(out, e)
		}
	}
	return out
}

// waitEvent polls the session's events for one matching pred.
func waitEvent(t *testing.T, s *sessions.Session, what string, pred func(event) bool) event {
	t.Helper()
	return waitEventFor(t, s, 60*time.Second, what, pred)
}

// waitEventFor is waitEvent with its own bound (image builds that install
// packages take minutes on a loaded machine).
func waitEventFor(t *testing.T, s *sessions.Session, d time.Duration, what string, pred func(event) bool) event {
	t.Helper()
	var got event
	waitFor(t, d, what, func() bool {
		for _, e := range events(s.Dir) {
			if pred(e) {
				got = e
				return true
			}
		}
		return false
	})
	return got
}

func noEvent(s *sessions.Session, pred func(event) bool) bool {
	for _, e := range events(s.Dir) {
		if pred(e) {
			return false
		}
	}
	return true
}

func notice(kind string) func(event) bool {
	return func(e event) bool { return e.s("type") == "notice" && e.s("kind") == kind }
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func dumpEvents(t *testing.T, s *sessions.Session) {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "events.jsonl"))
	t.Logf("events of %s:\n%s", s.ID, b)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// testCert is a self-signed certificate for 127.0.0.1.
type testCert struct {
	certFile, keyFile string
	pool              *x509.CertPool
}

func newTestCert(t *testing.T) *testCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "clawguard-e2e"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := &testCert{certFile: filepath.Join(dir, "cert.pem"), keyFile: filepath.Join(dir, "key.pem"), pool: x509.NewCertPool()}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	os.WriteFile(c.certFile, certPEM, 0o644)
	os.WriteFile(c.keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600)
	c.pool.AppendCertsFromPEM(certPEM)
	return c
}
