package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// The test is about the proxy: the guard is a table of answers (the real
// decision is tested in the server's netconnect package and end to end).
type fakeGuard struct {
	mu      sync.Mutex
	answers map[string]guardv1.Effect // "host:port" → effect; missing: deny
	calls   []string
	holds   map[string]string // hold id → "host:port"
	// approveOnAwait makes a held destination approved during the wait,
	// after which it is allowed.
	approveOnAwait bool
}

func (g *fakeGuard) Connect(_ context.Context, _ Session, d Dest) (Verdict, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	key := fmt.Sprintf("%s:%d", d.Host, d.Port)
	g.calls = append(g.calls, key)
	e, ok := g.answers[key]
	if !ok {
		e = guardv1.Effect_EFFECT_DENY
	}
	v := Verdict{Effect: e, Reason: "fake rule for " + key, DecisionID: fmt.Sprintf("dec_%d", len(g.calls))}
	if e == guardv1.Effect_EFFECT_HOLD {
		v.HoldID, v.Approvers = "hold_"+d.Host, "an admin of group research"
		g.holds[v.HoldID] = key
	}
	return v, nil
}

func (g *fakeGuard) Await(ctx context.Context, holdID string, wait time.Duration) (Resolution, error) {
	g.mu.Lock()
	approve := g.approveOnAwait
	if approve {
		g.answers[g.holds[holdID]] = guardv1.Effect_EFFECT_ALLOW
	}
	g.mu.Unlock()
	if approve {
		return Resolution{Resolved: true, Outcome: guardv1.Outcome_OUTCOME_APPROVE, Resolver: "telegram:dana"}, nil
	}
	return Resolution{}, nil // still pending at the end of the wait
}

func (g *fakeGuard) asked() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.calls...)
}

// names is a resolver the test controls: each name's answers in turn.
type names struct {
	mu      sync.Mutex
	answers map[string][][]netip.Addr
	lookups atomic.Int32
}

func (n *names) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	n.lookups.Add(1)
	n.mu.Lock()
	defer n.mu.Unlock()
	list := n.answers[host]
	if len(list) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	a := list[0]
	if len(list) > 1 {
		n.answers[host] = list[1:]
	}
	return a, nil
}

// echoServer counts connections and echoes what it reads.
type echoServer struct {
	ln       net.Listener
	accepted atomic.Int32
	got      chan string // first bytes of each connection
}

func newEcho(t *testing.T) *echoServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echoServer{ln: ln, got: make(chan string, 16)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.accepted.Add(1)
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				n, _ := c.Read(buf)
				e.got <- string(buf[:n])
				c.Write(buf[:n])
				io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return e
}

func (e *echoServer) port() int { return e.ln.Addr().(*net.TCPAddr).Port }

type rig struct {
	t      *testing.T
	proxy  *Proxy
	guard  *fakeGuard
	names  *names
	policy *AddressPolicy
	sock   string
}

func newRig(t *testing.T, limits Limits) *rig {
	t.Helper()
	r := &rig{t: t, guard: &fakeGuard{answers: map[string]guardv1.Effect{}, holds: map[string]string{}}, names: &names{answers: map[string][][]netip.Addr{}},
		policy: &AddressPolicy{Allowed: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}}
	p, err := New(Config{Decider: r.guard, Awaiter: r.guard, Policy: r.policy, Resolver: r.names, Limits: limits,
		Metrics: NewMetrics(prometheusRegistry()), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	r.proxy = p
	r.sock = r.serve("s1")
	return r
}

func (r *rig) serve(session string) string {
	sock := filepath.Join(r.t.TempDir(), "egress.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		r.t.Fatal(err)
	}
	r.proxy.Serve(Session{ID: session, GroupID: "ag_research"}, ln)
	r.t.Cleanup(func() { r.proxy.Stop(session, "test over") })
	return sock
}

// connect sends a raw CONNECT (plus extra bytes) and reads the answer head.
func connectVia(t *testing.T, sock, target, extraHeaders, after string) (net.Conn, *http.Response) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\n%s\r\n%s", target, extraHeaders, after)
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	return c, resp
}

func prometheusRegistry() *prometheus.Registry { return prometheus.NewRegistry() }

func body(r *http.Response) string { b, _ := io.ReadAll(r.Body); return string(b) }

func TestAllowedTunnelCarriesBytes(t *testing.T) {
	r := newRig(t, DefaultLimits)
	e := newEcho(t)
	target := fmt.Sprintf("127.0.0.1:%d", e.port())
	r.guard.answers[target] = guardv1.Effect_EFFECT_ALLOW
	c, resp := connectVia(t, r.sock, target, "", "")
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %s", resp.Status)
	}
	fmt.Fprint(c, "hello")
	buf := make([]byte, 5)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("echo: %q %v", buf, err)
	}
}

func TestDeniedNeverReachesTheDestination(t *testing.T) {
	r := newRig(t, DefaultLimits)
	e := newEcho(t)
	_, resp := connectVia(t, r.sock, fmt.Sprintf("127.0.0.1:%d", e.port()), "", "")
	if resp.StatusCode != 403 || resp.Header.Get(HeaderOutcome) != "denied" || !strings.Contains(body(resp), "fake rule") {
		t.Fatalf("denied: %s %v", resp.Status, resp.Header)
	}
	if n := e.accepted.Load(); n != 0 {
		t.Fatalf("a denied destination was connected %d times", n)
	}
}

func TestHeldAnswersNamingTheHoldThenApprovalConnects(t *testing.T) {
	r := newRig(t, Limits{MaxOpen: 8, Rate: 100, Burst: 100, Idle: time.Minute, MaxDuration: time.Hour, HoldWait: 10 * time.Millisecond, DialTimeout: time.Second})
	e := newEcho(t)
	r.names.answers["held.test"] = [][]netip.Addr{{netip.MustParseAddr("127.0.0.1")}, {netip.MustParseAddr("127.0.0.1")}}
	target := fmt.Sprintf("held.test:%d", e.port())
	r.guard.answers[target] = guardv1.Effect_EFFECT_HOLD
	_, resp := connectVia(t, r.sock, target, "", "")
	b := body(resp)
	if resp.StatusCode != 403 || resp.Header.Get(HeaderHold) != "hold_held.test" || resp.Header.Get(HeaderOutcome) != "held" ||
		resp.Header.Get("Retry-After") == "" || !strings.Contains(b, "retry once it is approved") || !strings.Contains(b, "an admin of group research") {
		t.Fatalf("held: %s %v %q", resp.Status, resp.Header, b)
	}
	if e.accepted.Load() != 0 {
		t.Fatal("a held destination was connected")
	}
	// Approved during the wait: asked again (the approval is used by that
	// decision), then connected.
	r.guard.mu.Lock()
	r.guard.approveOnAwait = true
	r.guard.mu.Unlock()
	c, resp := connectVia(t, r.sock, target, "", "after approval")
	if resp.StatusCode != 200 {
		t.Fatalf("approved: %s %s", resp.Status, body(resp))
	}
	defer c.Close()
	if got := <-e.got; got != "after approval" {
		t.Fatalf("echo got %q", got)
	}
	if asked := r.guard.asked(); len(asked) != 3 {
		t.Fatalf("the guard was asked %v, want held, held, allowed", asked)
	}
}

func TestBlockedAddressesNeverOfferedForApproval(t *testing.T) {
	r := newRig(t, DefaultLimits)
	r.names.answers["metadata.test"] = [][]netip.Addr{{netip.MustParseAddr("169.254.169.254")}}
	r.names.answers["mixed.test"] = [][]netip.Addr{{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("10.1.2.3")}}
	r.names.answers["v6loop.test"] = [][]netip.Addr{{netip.MustParseAddr("::1")}}
	for _, target := range []string{"169.254.169.254:80", "127.0.0.2:443", "10.0.0.1:443", "[::1]:443", "[::ffff:169.254.169.254]:80",
		"192.168.1.1:22", "[fe80::1]:443", "metadata.test:80", "mixed.test:443", "v6loop.test:443", "0.0.0.0:80", "[64:ff9b::a00:1]:443"} {
		r.guard.answers[target] = guardv1.Effect_EFFECT_ALLOW // even an allow rule does not open them
		_, resp := connectVia(t, r.sock, target, "", "")
		if resp.StatusCode != 403 || resp.Header.Get(HeaderOutcome) != "blocked" {
			t.Errorf("%s: %s %s", target, resp.Status, resp.Header.Get(HeaderOutcome))
		}
	}
	if asked := r.guard.asked(); len(asked) != 0 {
		t.Fatalf("blocked destinations were offered to the guard: %v", asked)
	}
}

func TestOwnEndpointRefusedEvenInAnAllowedRange(t *testing.T) {
	r := newRig(t, DefaultLimits)
	own := newEcho(t)
	r.policy.AddOwnEndpoints(netip.MustParseAddrPort(fmt.Sprintf("127.0.0.1:%d", own.port())))
	target := fmt.Sprintf("127.0.0.1:%d", own.port())
	r.guard.answers[target] = guardv1.Effect_EFFECT_ALLOW
	_, resp := connectVia(t, r.sock, target, "", "")
	if resp.StatusCode != 403 || own.accepted.Load() != 0 {
		t.Fatalf("own endpoint: %s, accepted %d", resp.Status, own.accepted.Load())
	}
}

// A name is resolved once: an answer that changes after the check is never
// dialed (DNS rebinding).
func TestNameResolvedOnceNoRebinding(t *testing.T) {
	r := newRig(t, DefaultLimits)
	e := newEcho(t)
	r.names.answers["rebind.test"] = [][]netip.Addr{{netip.MustParseAddr("127.0.0.1")}, {netip.MustParseAddr("169.254.169.254")}}
	target := fmt.Sprintf("rebind.test:%d", e.port())
	r.guard.answers[target] = guardv1.Effect_EFFECT_ALLOW
	c, resp := connectVia(t, r.sock, target, "", "ping")
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %s %s", resp.Status, body(resp))
	}
	defer c.Close()
	if got := <-e.got; got != "ping" {
		t.Fatalf("echo got %q", got)
	}
	if n := r.names.lookups.Load(); n != 1 {
		t.Fatalf("resolved %d times, want once", n)
	}
}

func TestSmugglingRefused(t *testing.T) {
	r := newRig(t, DefaultLimits)
	e := newEcho(t)
	target := fmt.Sprintf("127.0.0.1:%d", e.port())
	r.guard.answers[target] = guardv1.Effect_EFFECT_ALLOW
	// A Host header that names another destination than the CONNECT.
	_, resp := connectVia(t, r.sock, target, "Host: evil.example:443\r\n", "")
	if resp.StatusCode != 400 || len(r.guard.asked()) != 0 || e.accepted.Load() != 0 {
		t.Fatalf("disagreeing Host: %s, asked %v, accepted %d", resp.Status, r.guard.asked(), e.accepted.Load())
	}
	// A second CONNECT sent in the same stream is tunnel bytes for the
	// first destination, never a request to the proxy.
	second := "CONNECT 169.254.169.254:80 HTTP/1.1\r\n\r\n"
	c, resp := connectVia(t, r.sock, target, "", second)
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %s", resp.Status)
	}
	defer c.Close()
	if got := <-e.got; got != second {
		t.Fatalf("the destination got %q, want the smuggled bytes as data", got)
	}
	if asked := r.guard.asked(); len(asked) != 1 {
		t.Fatalf("the guard was asked %v, want the first destination only", asked)
	}
}

func TestLimitsHoldPerSession(t *testing.T) {
	r := newRig(t, Limits{MaxOpen: 2, Rate: 1000, Burst: 1000, Idle: time.Minute, MaxDuration: time.Hour, HoldWait: time.Second, DialTimeout: time.Second})
	e := newEcho(t)
	target := fmt.Sprintf("127.0.0.1:%d", e.port())
	r.guard.answers[target] = guardv1.Effect_EFFECT_ALLOW
	for i := 0; i < 2; i++ {
		if _, resp := connectVia(t, r.sock, target, "", ""); resp.StatusCode != 200 {
			t.Fatalf("tunnel %d: %s", i, resp.Status)
		}
	}
	_, resp := connectVia(t, r.sock, target, "", "")
	if resp.StatusCode != 429 || resp.Header.Get(HeaderOutcome) != "limited" || resp.Header.Get("Retry-After") == "" ||
		!strings.Contains(body(resp), "limit open") {
		t.Fatalf("third tunnel: %s %v", resp.Status, resp.Header)
	}
	other := r.serve("s2")
	if _, resp := connectVia(t, other, target, "", ""); resp.StatusCode != 200 {
		t.Fatalf("another session was limited too: %s", resp.Status)
	}
}

func TestCutClosesOpenTunnels(t *testing.T) {
	r := newRig(t, DefaultLimits)
	e := newEcho(t)
	target := fmt.Sprintf("127.0.0.1:%d", e.port())
	r.guard.answers[target] = guardv1.Effect_EFFECT_ALLOW
	c, resp := connectVia(t, r.sock, target, "", "x")
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	<-e.got
	if n := r.proxy.Cut("s1", "frozen"); n != 1 {
		t.Fatalf("cut %d connections, want 1", n)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 16)
	for {
		_, err := c.Read(buf)
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("after the cut: %v, want EOF", err)
		}
	}
}

func TestIdleTunnelCloses(t *testing.T) {
	r := newRig(t, Limits{MaxOpen: 8, Rate: 100, Burst: 100, Idle: 100 * time.Millisecond, MaxDuration: time.Hour, HoldWait: time.Second, DialTimeout: time.Second})
	e := newEcho(t)
	target := fmt.Sprintf("127.0.0.1:%d", e.port())
	r.guard.answers[target] = guardv1.Effect_EFFECT_ALLOW
	c, resp := connectVia(t, r.sock, target, "", "")
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("idle tunnel: %v, want EOF", err)
	}
}

// A flood of idle connections to the socket is bounded; another session's
// proxy still answers.
func TestIdleClientFloodBounded(t *testing.T) {
	r := newRig(t, Limits{MaxOpen: 2, Rate: 1000, Burst: 1000, Idle: time.Minute, MaxDuration: time.Hour, HoldWait: time.Second, DialTimeout: time.Second})
	var idle []net.Conn
	for i := 0; i < 4; i++ { // 2 × MaxOpen: the bound
		c, err := net.Dial("unix", r.sock)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	c, err := net.Dial("unix", r.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 429 || !strings.Contains(body(resp), "limit clients") {
		t.Fatalf("a connection past the bound: %v %v", resp, err)
	}
	e := newEcho(t)
	target := fmt.Sprintf("127.0.0.1:%d", e.port())
	r.guard.answers[target] = guardv1.Effect_EFFECT_ALLOW
	if _, resp := connectVia(t, r.serve("s2"), target, "", ""); resp.StatusCode != 200 {
		t.Fatalf("another session: %s", resp.Status)
	}
}
