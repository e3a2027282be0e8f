package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/clawguard/clawguard/deploy/metricnames"
	"github.com/clawguard/clawguard/e2e/procs"
	"github.com/clawguard/clawguard/migrations/pgtest"
)

// repoRoot is the workspace root (tests run in e2e/).
const repoRoot = ".."

var bins *procs.Bins

func TestMain(m *testing.M) {
	b, err := procs.NewBins(repoRoot)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	bins = b
	code := pgtest.Main(m)
	b.Close()
	os.Exit(code)
}

// bin is one of the programs, built once per test binary (procs.Bins).
func bin(t *testing.T, name string) string { return bins.Path(t, name) }

// proc is one program of the system, its output in a log file.
type proc = procs.Proc

// start runs a program until the test ends (SIGTERM, then SIGKILL after 15s).
// On failure the tail of its log is printed.
func start(t *testing.T, name string, env []string, argv ...string) *proc {
	t.Helper()
	return procs.Start(t, name, env, 60, argv...)
}

func cleanEnv() []string { return procs.CleanEnv() }

// waitFor polls cond until it holds or the deadline passes; cond's string
// says what it saw last, for the failure message.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	procs.WaitFor(t, timeout, 50*time.Millisecond, what, cond)
}

func freePort(t *testing.T) string { return procs.FreePort(t) }

func loopback(t *testing.T) string { return procs.Loopback(t) }

// server is one clawguard-server replica.
type server struct {
	*proc
	addr, metrics, tokenFile string
}

// startServer runs `clawguard-server serve --auto-migrate` on dbURL and waits
// until it answers health checks as SERVING. Replicas share tokenFile: the
// first creates the operator token, the others read it.
func startServer(t *testing.T, name, dbURL, addr, metricsAddr, tokenFile string, extra ...string) *server {
	t.Helper()
	args := append([]string{bin(t, "clawguard-server"), "serve", "--database-url", dbURL, "--auto-migrate",
		"--listen", addr, "--metrics-listen", metricsAddr, "--operator-token-file", tokenFile, "--log-level", "info"}, extra...)
	s := &server{proc: start(t, name, nil, args...), addr: addr, metrics: metricsAddr, tokenFile: tokenFile}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	waitFor(t, 60*time.Second, name+" SERVING", func() (bool, string) {
		if s.Exited() {
			t.Fatalf("%s exited during start:\n%s", name, s.Tail(30))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return false, err.Error()
		}
		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return false, resp.GetStatus().String()
		}
		_, err = os.Stat(tokenFile)
		return err == nil, fmt.Sprint("operator token file: ", err)
	})
	return s
}

// ncl runs the ncl binary against one server with the operator token.
type ncl struct {
	bin, server, tokenFile, home string
	env                          []string // extra environment (e.g. CLAWGUARD_TLS_*)
}

func nclFor(t *testing.T, s *server) ncl {
	return ncl{bin: bin(t, "ncl"), server: s.addr, tokenFile: s.tokenFile, home: t.TempDir()}
}

func (n ncl) run(args ...string) (stdout, stderr string, code int) {
	cmd := exec.Command(n.bin, args...)
	cmd.Env = append(append(cleanEnv(), "CLAWGUARD_SERVER="+n.server, "CLAWGUARD_TOKEN_FILE="+n.tokenFile, "HOME="+n.home), n.env...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code = 0
	if err != nil {
		code = -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
	}
	return out.String(), errb.String(), code
}

// must runs ncl and fails the test unless it exits 0; it returns stdout trimmed.
func (n ncl) must(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := n.run(args...)
	if code != 0 {
		t.Fatalf("ncl %s (server %s): exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), n.server, code, out, errOut)
	}
	return strings.TrimSpace(out)
}

// runnerToken mints a runner token through ncl and writes it to a 0600 file.
func runnerToken(t *testing.T, n ncl, runnerID string) string {
	t.Helper()
	secret := n.must(t, "tokens", "create", "--kind", "runner", "--runner", runnerID, "--name", "e2e "+runnerID, "--secret-only")
	if secret == "" || strings.ContainsAny(secret, " \n") {
		t.Fatalf("tokens create --secret-only printed %q", secret)
	}
	path := filepath.Join(t.TempDir(), runnerID+".token")
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runnerDataDir is a runner's data dir with a short path: the unix
// sockets of its sessions live under it, and a socket's path is limited to
// about 100 bytes (t.TempDir's is too long).
func runnerDataDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cgr")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// runnerOpts is how one clawguard-runner is started.
type runnerOpts struct {
	id, host, server, tokenFile, dataDir, metrics string
	groups                                        []string
	script                                        string   // the demo agent's CLAWGUARD_DEMO_SCRIPT
	wrap                                          []string // command prefix, e.g. ip netns exec <ns>
	extra                                         []string // more flags
}

// startRunner runs clawguard-runner with the process runtime and the demo agent.
func startRunner(t *testing.T, o runnerOpts) *proc {
	t.Helper()
	argv := append(append([]string{}, o.wrap...), bin(t, "clawguard-runner"),
		"--server", o.server, "--token-file", o.tokenFile, "--id", o.id, "--host", o.host,
		"--runtime", "process", "--agent-binary", bin(t, "demo-agent"), "--data-dir", o.dataDir,
		"--metrics-listen", o.metrics, "--log-level", "info", "--agent-env", "CLAWGUARD_DEMO_SCRIPT="+o.script)
	for _, g := range o.groups {
		argv = append(argv, "--group", g)
	}
	argv = append(argv, o.extra...)
	return start(t, o.id, nil, argv...)
}

// scrape GETs a /metrics endpoint.
func scrape(addr string) (string, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s/metrics: %s", addr, resp.Status)
	}
	return string(b), nil
}

func exported(t *testing.T, body string) metricnames.Exported {
	t.Helper()
	e, err := metricnames.ParseExposition(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// sample returns the value of an unlabelled sample in an exposition body.
func sample(body, name string) (string, bool) {
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// event is one line of the demo agent's events.jsonl.
type event map[string]any

func (e event) str(k string) string { s, _ := e[k].(string); return s }

// agentEvents reads every events.jsonl under a runner's data dir (one per session).
func agentEvents(dataDir string) []event {
	files, _ := filepath.Glob(filepath.Join(dataDir, "sessions", "*", "events.jsonl"))
	var out []event
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			var ev event
			if json.Unmarshal([]byte(line), &ev) == nil {
				out = append(out, ev)
			}
		}
	}
	return out
}

func eventsWhere(evs []event, match func(event) bool) []event {
	var out []event
	for _, e := range evs {
		if match(e) {
			out = append(out, e)
		}
	}
	return out
}

func describe(evs []event) string {
	b, _ := json.Marshal(evs)
	return string(b)
}
