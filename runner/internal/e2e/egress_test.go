package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clawguard/clawguard/proto/egressrule"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/runtime/docker"
	"github.com/clawguard/clawguard/runner/internal/sessions"
)

// destination is a server on the host's loopback that agents reach only
// through their runner: it counts the connections it accepted.
type destination struct {
	*httptest.Server
	conns atomic.Int32
	port  int
	// ticks counts what /stream wrote; streamEnded is closed when a
	// /stream's connection is gone.
	ticks       atomic.Int32
	streamEnded chan struct{}
}

// testTLS is a self-signed certificate for *.egress.test and 127.0.0.1:
// the CA the runner puts in the agent image (--agent-ca-file).
type testTLS struct {
	cert   tls.Certificate
	caFile string
}

func newTestTLS(t *testing.T) *testTLS {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "egress-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"*.egress.test"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return &testTLS{cert: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, caFile: caFile}
}

// serve starts a destination: HTTPS with the test certificate, or plain.
func (c *testTLS) serve(t *testing.T, secure bool) *destination {
	t.Helper()
	d := &destination{streamEnded: make(chan struct{})}
	var endOnce sync.Once
	d.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stream" { // until the client goes
			defer endOnce.Do(func() { close(d.streamEnded) })
			for {
				if _, err := fmt.Fprintln(w, "tick"); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				d.ticks.Add(1)
				select {
				case <-r.Context().Done():
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		}
		fmt.Fprint(w, "hello")
	}))
	d.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			d.conns.Add(1)
		}
	}
	if secure {
		d.TLS = &tls.Config{Certificates: []tls.Certificate{c.cert}}
		d.StartTLS()
	} else {
		d.Start()
	}
	d.port = d.Listener.Addr().(*net.TCPAddr).Port
	t.Cleanup(d.Close)
	return d
}

// egressWorld is a group on the Debian base (curl in it) with one agent
// container that only waits (sleep), its runner opening 127.0.0.1 to
// agents and resolving their names with a DNS server the test controls
// (*.egress.test: api → 127.0.0.1, private → 10.0.0.5, mixed → 127.0.0.1
// and 10.0.0.5, rebind → 127.0.0.1 then 169.254.169.254), the test CA in
// the agent's image, and egressclient in its workspace. (Names, not
// localhost: clients never proxy localhost, and NO_PROXY names it.)
type egressWorld struct {
	s         *server
	r         *runner
	group     string
	sess      *sessions.Session
	container string
	owner     string
	tls       *testTLS
	metrics   string // the runner's metrics listener (never reachable)
	dns       *testDNS
}

var (
	loopback   = netip.MustParseAddr("127.0.0.1")
	private    = netip.MustParseAddr("10.0.0.5")
	metadataIP = netip.MustParseAddr("169.254.169.254")
)

func newEgressWorld(t *testing.T) *egressWorld {
	t.Helper()
	base := debianBase(t)
	ctx := context.Background()
	w := &egressWorld{s: startServer(t), tls: newTestTLS(t), metrics: freeAddr(t), dns: newTestDNS(t, map[string][][]netip.Addr{
		"api.egress.test": {{loopback}}, "private.egress.test": {{private}}, "mixed.egress.test": {{loopback, private}},
		"rebind.egress.test": {{loopback}, {metadataIP}},
	})}
	w.owner = w.s.owner(t, "telegram:olivia")
	resp, err := w.s.op.registry.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: "egress", BaseImage: base})
	if err != nil {
		t.Fatal(err)
	}
	w.group = resp.GetGroup().GetId()
	t.Cleanup(func() { removeGroupImages(t, w.group) })
	if _, err := w.s.op.registry.UpdateGroupConfig(ctx, &guardv1.UpdateGroupConfigRequest{Group: w.group,
		AgentCommand: &guardv1.AgentCommand{Args: []string{"sleep", "3600"}}}); err != nil {
		t.Fatal(err)
	}
	w.r = w.s.startRunner(t, runnerOpts{runtime: "docker", groups: []string{w.group}, caFile: w.tls.caFile,
		egressAllow: []string{"127.0.0.1/32"}, egressHoldWait: time.Second, metricsListen: w.metrics, egressDNS: w.dns.addr})
	w.sess = w.r.session(t, w.group)
	w.container = w.r.Runtime.(*docker.Runtime).ContainerName(w.sess.ID)
	waitFor(t, 120*time.Second, "the agent container", func() bool {
		c, err := dockerClient(t).ContainerInspect(ctx, w.container)
		return err == nil && c.State != nil && c.State.Running
	})
	bin, err := os.ReadFile(egressClient)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w.sess.Dir, "egressclient"), bin, 0o755); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *egressWorld) rule(t *testing.T, host string, port int, e guardv1.Effect) {
	t.Helper()
	if _, err := w.s.op.registry.SetEgressRule(context.Background(), &guardv1.SetEgressRuleRequest{Group: w.group, Host: host,
		Port: int32(port), Effect: e}); err != nil {
		t.Fatal(err)
	}
}

// curl runs curl in the agent's container (its environment: the proxy
// variables and CA roots the runner set) and answers its -w output.
func (w *egressWorld) curl(t *testing.T, args ...string) (string, int) {
	t.Helper()
	return execIn(t, w.container, append([]string{"curl", "-sS", "-o", "/dev/null", "-w", "connect=%{http_connect} code=%{http_code}", "--max-time", "30"}, args...)...)
}

// goGet runs egressclient (Go's net/http with HTTPS_PROXY) in the container.
func (w *egressWorld) goGet(t *testing.T, url string) string {
	t.Helper()
	out, _ := execIn(t, w.container, "/workspace/egressclient", "get", url)
	return strings.TrimSpace(out)
}

// pendingNetConnect is the group's pending net_connect holds.
func (w *egressWorld) pendingNetConnect(t *testing.T) []*guardv1.Hold {
	t.Helper()
	resp, err := w.s.op.approvals.List(context.Background(), &guardv1.ListRequest{AgentGroupId: w.group,
		Status: guardv1.HoldStatus_HOLD_STATUS_PENDING, Kind: egressrule.ApprovalKind})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetHolds()
}

func holdOf(out string) string {
	for _, f := range strings.Fields(out) {
		if h, ok := strings.CutPrefix(f, "hold="); ok {
			return h
		}
	}
	return ""
}

// curl and Go's net/http, inside a real container with no network, reach
// what the group allows through the runner; a denied destination is refused
// and never reached; a held one is refused after the wait naming the hold,
// connects once approved (once: the next is held again; for the session:
// until it ends); audit mode lets it through and logs what enforce would do.
func TestEgressFromAContainer(t *testing.T) {
	w := newEgressWorld(t)
	allowed, denied, held, plain := w.tls.serve(t, true), w.tls.serve(t, true), w.tls.serve(t, true), w.tls.serve(t, false)
	w.rule(t, "api.egress.test", allowed.port, guardv1.Effect_EFFECT_ALLOW)
	w.rule(t, "api.egress.test", denied.port, guardv1.Effect_EFFECT_DENY)
	w.rule(t, "api.egress.test", plain.port, guardv1.Effect_EFFECT_ALLOW)

	if out, code := w.curl(t, fmt.Sprintf("https://api.egress.test:%d/", allowed.port)); code != 0 || !strings.Contains(out, "connect=200 code=200") {
		t.Fatalf("curl to an allowed destination: exit %d, %s", code, out)
	}
	if out := w.goGet(t, fmt.Sprintf("https://api.egress.test:%d/", allowed.port)); out != "status 200 body hello" {
		t.Fatalf("Go to an allowed destination: %s", out)
	}
	if out, code := execIn(t, w.container, "curl", "-sS", "--max-time", "30", fmt.Sprintf("http://api.egress.test:%d/", plain.port)); code != 0 || out != "hello" {
		t.Fatalf("curl, plain HTTP: exit %d, %q", code, out)
	}
	if out, code := w.curl(t, fmt.Sprintf("https://api.egress.test:%d/", denied.port)); code == 0 || !strings.Contains(out, "connect=403") {
		t.Fatalf("curl to a denied destination: exit %d, %s", code, out)
	}
	if out := w.goGet(t, fmt.Sprintf("https://api.egress.test:%d/", denied.port)); !strings.Contains(out, "proxy=403 egress=denied") {
		t.Fatalf("Go to a denied destination: %s", out)
	}
	if n := denied.conns.Load(); n != 0 {
		t.Fatalf("the denied destination was reached %d times", n)
	}

	// Held: refused after the wait, naming the hold; approved once, the
	// next connection goes through and the one after is held again.
	url := fmt.Sprintf("https://api.egress.test:%d/", held.port)
	first := w.goGet(t, url)
	hold := holdOf(first)
	if !strings.Contains(first, "proxy=403 egress=held") || hold == "" || held.conns.Load() != 0 {
		t.Fatalf("Go to a held destination: %s (reached %d)", first, held.conns.Load())
	}
	holds := w.pendingNetConnect(t)
	if len(holds) != 1 || holds[0].GetId() != hold || !strings.Contains(holds[0].GetTitle(), fmt.Sprintf("api.egress.test:%d", held.port)) ||
		!strings.Contains(holds[0].GetQuestion(), w.sess.ID) {
		t.Fatalf("pending holds: %v, want one naming api.egress.test:%d and session %s", holds, held.port, w.sess.ID)
	}
	if out, _ := w.curl(t, url); !strings.Contains(out, "connect=403") || len(w.pendingNetConnect(t)) != 1 {
		t.Fatalf("a second held connection: %s, %d holds, want one shared hold", out, len(w.pendingNetConnect(t)))
	}
	w.s.approve(t, hold, w.owner)
	if out := w.goGet(t, url); out != "status 200 body hello" {
		t.Fatalf("after approval: %s", out)
	}
	again := w.goGet(t, url)
	if !strings.Contains(again, "egress=held") || holdOf(again) == hold {
		t.Fatalf("a second connection after a once-approval: %s, want a new hold", again)
	}
	if _, err := w.s.op.approvals.Resolve(context.Background(), &guardv1.ResolveRequest{Id: holdOf(again), Outcome: guardv1.Outcome_OUTCOME_APPROVE,
		AsUser: w.owner, StandingSession: true}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if out, code := w.curl(t, url); code != 0 || !strings.Contains(out, "code=200") {
			t.Fatalf("connection %d under the session grant: exit %d, %s", i, code, out)
		}
	}

	// Audit mode: a destination nobody named goes through, logged as held.
	if _, err := w.s.op.registry.SetActionSettings(context.Background(), &guardv1.SetActionSettingsRequest{Action: egressrule.CatalogAction,
		Mode: guardv1.EnforcementMode_ENFORCEMENT_MODE_AUDIT}); err != nil {
		t.Fatal(err)
	}
	audited := w.tls.serve(t, true)
	if out := w.goGet(t, fmt.Sprintf("https://api.egress.test:%d/", audited.port)); out != "status 200 body hello" {
		t.Fatalf("audit mode: %s", out)
	}
	decs, err := w.s.op.registry.ListDecisions(context.Background(), &guardv1.ListDecisionsRequest{Action: egressrule.CatalogAction, Group: w.group})
	if err != nil {
		t.Fatal(err)
	}
	logged := false
	for _, d := range decs.GetDecisions() {
		if strings.Contains(d.GetWouldReason(), fmt.Sprintf("api.egress.test:%d", audited.port)) && d.GetWouldEffect() == guardv1.Effect_EFFECT_HOLD {
			logged = true
		}
	}
	if !logged {
		t.Fatalf("audit mode: no decision logged that enforce would hold: %v", decs.GetDecisions())
	}
}

// Nothing private is reachable, whatever the rules say, and nothing of it
// is offered for approval: metadata, loopback outside the opened range,
// private addresses, a name that resolves to a refused address, the
// runner's own metrics; there is no route around the proxy; a freeze cuts
// an open tunnel at once.
func TestEgressAttacksAndFreeze(t *testing.T) {
	w := newEgressWorld(t)
	dest := w.tls.serve(t, true)
	w.rule(t, "api.egress.test", dest.port, guardv1.Effect_EFFECT_ALLOW)
	if _, err := w.s.op.registry.SetEgressDefault(context.Background(), &guardv1.SetEgressDefaultRequest{Group: w.group,
		Effect: guardv1.Effect_EFFECT_ALLOW}); err != nil {
		t.Fatal(err) // even allow-everything opens none of what follows
	}
	_, metricsPort, _ := net.SplitHostPort(w.metrics)
	for _, target := range []string{
		"https://169.254.169.254/latest/meta-data/", "https://127.0.0.2:" + fmt.Sprint(dest.port) + "/",
		"https://10.1.2.3/", "https://192.168.1.1/", "https://[fd00::1]/", "https://[::1]:" + fmt.Sprint(dest.port) + "/",
		// Names the test's DNS answers with a refused address.
		"https://private.egress.test/", "https://mixed.egress.test:" + fmt.Sprint(dest.port) + "/",
		// The runner's own metrics, in the opened range.
		"http://api.egress.test:" + metricsPort + "/metrics",
	} {
		// A CONNECT refused: connect=403; a plain-HTTP request: code=403.
		if out, code := w.curl(t, "--noproxy", "", target); !strings.Contains(out, "connect=403") && !strings.Contains(out, "code=403") {
			t.Errorf("%s: exit %d, %s; want refused by the proxy", target, code, out)
		}
	}
	if n := len(w.pendingNetConnect(t)); n != 0 {
		t.Fatalf("%d refused destinations were offered for approval", n)
	}
	if n := dest.conns.Load(); n != 0 {
		t.Fatalf("the destination was reached %d times by refused connections", n)
	}
	// A name whose answer changes after the check (DNS rebinding) is
	// resolved once: the checked address is the one dialed.
	if out := w.goGet(t, fmt.Sprintf("https://rebind.egress.test:%d/", dest.port)); out != "status 200 body hello" {
		t.Fatalf("rebind: %s", out)
	}
	w.dns.mu.Lock()
	asked := w.dns.asked["rebind.egress.test"]
	w.dns.mu.Unlock()
	if asked != 1 {
		t.Fatalf("rebind.egress.test was resolved %d times, want once", asked)
	}

	// No route around the proxy: the container has no network.
	if out, code := execIn(t, w.container, "curl", "-sS", "--noproxy", "*", "--max-time", "10", "https://1.1.1.1/"); code == 0 {
		t.Fatalf("a direct connection went out: %s", out)
	}
	if out, code := execIn(t, w.container, "curl", "-sS", "--noproxy", "*", "--max-time", "10", fmt.Sprintf("https://127.0.0.1:%d/", dest.port)); code == 0 {
		t.Fatalf("the host's loopback was reached directly: %s", out)
	}

	// A freeze cuts an open tunnel at once: the destination sees its
	// connection go (the agent, stopped by the freeze, cannot tell).
	streamDest := w.tls.serve(t, true)
	go exec.Command("docker", "exec", w.container, "/workspace/egressclient", "stream", fmt.Sprintf("https://api.egress.test:%d/stream", streamDest.port)).Run()
	waitFor(t, 30*time.Second, "the stream flowing", func() bool { return streamDest.ticks.Load() >= 3 })
	frozenAt := time.Now()
	if _, err := w.s.op.registry.Freeze(context.Background(), &guardv1.FreezeRequest{Scope: guardv1.FreezeScope_FREEZE_SCOPE_GROUP,
		Group: w.group, Reason: "incident"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-streamDest.streamEnded:
	case <-time.After(30 * time.Second):
		t.Fatal("the open tunnel was not cut by the freeze")
	}
	if took := time.Since(frozenAt); took > 10*time.Second {
		t.Fatalf("the freeze cut the tunnel after %s", took)
	}
	if !strings.Contains(readFile(t, w.r.logFile), `msg="egress connections cut"`) {
		t.Fatal("the runner did not cut the session's connections (its log has no cut)")
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
