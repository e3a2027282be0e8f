// Package egress is an agent's way out: the runner's HTTP proxy, served to
// each session on a unix socket mounted into its container (whose network
// stays none). Every new connection is a net.connect decision on its
// destination (host and port): CONNECT for HTTPS and any TCP, absolute-form
// requests for plain HTTP. The proxy resolves the name itself, refuses an
// address no agent may reach (private, loopback, link-local and metadata,
// the runner's and the server's own), asks the guard, and dials the address
// it checked: nothing the DNS answers later is reached. A held destination
// waits a short while for its approval, else 403 names the hold. It never
// looks inside TLS: the decision is per destination, not per URL.
//
// Bounded per session: connections open and a rate of new ones, an idle
// and a total time limit; a freeze cuts a session's open connections.
package egress

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/clawguard/clawguard/proto/egressrule"
)

// Config is the runner's egress proxy.
type Config struct {
	Decider  Decider
	Awaiter  Awaiter
	Policy   *AddressPolicy
	Resolver Resolver // nil: net.DefaultResolver
	Limits   Limits
	Metrics  *Metrics // nil: none
	Log      *slog.Logger
	// Origin, when set, serves a session's origin-form requests on the
	// same socket (the model gateway); nil: they are refused.
	Origin func(Session) http.Handler
}

// Proxy serves every session's egress on the runner.
type Proxy struct {
	cfg Config

	mu       sync.Mutex
	sessions map[string]*sessionProxy
}

// New checks the configuration and returns the proxy.
func New(cfg Config) (*Proxy, error) {
	if cfg.Decider == nil || cfg.Awaiter == nil || cfg.Policy == nil {
		return nil, errors.New("egress: a decider, an awaiter and an address policy are required")
	}
	if err := cfg.Limits.Validate(); err != nil {
		return nil, err
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Proxy{cfg: cfg, sessions: map[string]*sessionProxy{}}, nil
}

// sessionProxy is one session's proxy: its listener, its admission gate and
// the connections it has open (a freeze closes them).
type sessionProxy struct {
	p    *Proxy
	s    Session
	ln   net.Listener
	gate *gate
	log  *slog.Logger

	mu   sync.Mutex
	live map[*tracked]struct{} // the connections open now
	done bool
}

// tracked is one open connection: the agent's side and its destination's.
type tracked struct{ conns []net.Conn }

func (t *tracked) close() {
	for _, c := range t.conns {
		c.Close()
	}
}

// Serve serves a session's egress on ln until Stop (a session served
// already is stopped first: its agent was restarted).
func (p *Proxy) Serve(s Session, ln net.Listener) {
	sp := &sessionProxy{p: p, s: s, ln: ln, gate: newGate(p.cfg.Limits), live: map[*tracked]struct{}{},
		log: p.cfg.Log.With("component", "egress", "session", s.ID, "group", s.GroupID)}
	p.mu.Lock()
	old := p.sessions[s.ID]
	p.sessions[s.ID] = sp
	p.mu.Unlock()
	if old != nil {
		old.stop("its session's egress was started again")
	}
	go sp.accept()
}

// Stop stops serving a session and cuts its open connections.
func (p *Proxy) Stop(sessionID, why string) {
	p.mu.Lock()
	sp := p.sessions[sessionID]
	delete(p.sessions, sessionID)
	p.mu.Unlock()
	if sp != nil {
		sp.stop(why)
	}
}

// Cut closes a session's open connections at once (a freeze), and keeps
// serving: its next connections are decided again (and denied while the
// freeze lasts). It returns how many it cut.
func (p *Proxy) Cut(sessionID, why string) int {
	p.mu.Lock()
	sp := p.sessions[sessionID]
	p.mu.Unlock()
	if sp == nil {
		return 0
	}
	return sp.cut(why)
}

func (sp *sessionProxy) stop(why string) {
	sp.mu.Lock()
	sp.done = true
	sp.mu.Unlock()
	sp.ln.Close()
	sp.cut(why)
}

func (sp *sessionProxy) cut(why string) int {
	sp.mu.Lock()
	open := make([]*tracked, 0, len(sp.live))
	for t := range sp.live {
		open = append(open, t)
	}
	sp.mu.Unlock()
	for _, t := range open {
		t.close()
	}
	if n := len(open); n > 0 {
		if sp.p.cfg.Metrics != nil {
			sp.p.cfg.Metrics.Cut.Add(float64(n))
		}
		sp.log.Info("egress connections cut", "connections", n, "why", why)
	}
	return len(open)
}

// track registers an open connection so a cut reaches it; the returned
// func unregisters it.
func (sp *sessionProxy) track(conns ...net.Conn) func() {
	t := &tracked{conns: conns}
	sp.mu.Lock()
	done := sp.done
	sp.live[t] = struct{}{}
	sp.mu.Unlock()
	if done {
		t.close()
	}
	if m := sp.p.cfg.Metrics; m != nil {
		m.Open.Inc()
	}
	return func() {
		sp.mu.Lock()
		delete(sp.live, t)
		sp.mu.Unlock()
		if m := sp.p.cfg.Metrics; m != nil {
			m.Open.Dec()
		}
	}
}

// accept serves the session's socket. The agent's side connections are
// bounded too (twice the open connections): one that asks nothing still
// holds a file and a goroutine of the runner until the header wait ends,
// and a flood of them must cost the other sessions nothing.
func (sp *sessionProxy) accept() {
	clients := make(chan struct{}, 2*sp.p.cfg.Limits.MaxOpen)
	for {
		c, err := sp.ln.Accept()
		if err != nil {
			return // closed by stop
		}
		select {
		case clients <- struct{}{}:
		default:
			go func() {
				(&refused{status: http.StatusTooManyRequests, outcome: "limited", retry: time.Second,
					text: "too many connections to the proxy from this session (limit clients); retry later"}).write(c)
				c.Close()
			}()
			continue
		}
		go func() {
			defer func() { <-clients }()
			sp.serve(c)
		}()
	}
}

// headerWait bounds how long a client may take to send a request's head.
const headerWait = 30 * time.Second

// serve reads one request from a client connection: a CONNECT becomes a
// tunnel, an absolute-form request is forwarded; either way the client's
// connection ends with it.
func (sp *sessionProxy) serve(c net.Conn) {
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(headerWait))
	br := bufio.NewReaderSize(c, 16<<10)
	proxied, err := isProxyRequest(br)
	if err != nil {
		return
	}
	if !proxied {
		c.SetReadDeadline(time.Time{})
		sp.origin(c, br)
		return
	}
	req, hosts, err := readRequest(br)
	if err != nil {
		if !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.EOF) {
			badRequest(errors.New("not an HTTP proxy request: " + err.Error())).write(c)
		}
		return
	}
	c.SetReadDeadline(time.Time{})
	if req.Method == http.MethodConnect {
		sp.connect(c, br, req, hosts)
		return
	}
	sp.forward(c, req, hosts)
}

// connect opens a CONNECT tunnel. Bytes the client sent after its request
// (br holds them) belong to the tunnel: they go to the decided destination
// and are never read as another request.
func (sp *sessionProxy) connect(client net.Conn, br *bufio.Reader, req *http.Request, hosts []string) {
	start := time.Now()
	d, err := connectTarget(req, hosts)
	if err != nil {
		sp.refuse(client, start, Dest{}, badRequest(err))
		return
	}
	up, rf := sp.admitAndOpen(req, d)
	if rf != nil {
		sp.refuse(client, start, d, rf)
		return
	}
	stop := sp.track(client, up.conn)
	defer stop()
	if _, err := client.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		up.conn.Close()
		return
	}
	sp.p.cfg.Metrics.outcome("allowed", time.Since(start))
	t := &tunnel{client: client, clientR: br, upstream: up.conn}
	why := t.run(sp.p.cfg.Limits.Idle, sp.p.cfg.Limits.MaxDuration)
	sp.closedLog(d, up, t.out.Load(), t.in.Load(), time.Since(start), why)
}

// admitAndOpen takes a slot of the session's limits, then opens the
// destination; the slot is held until the connection closes.
func (sp *sessionProxy) admitAndOpen(req *http.Request, d Dest) (*opened, *refused) {
	release, lim := sp.gate.admit(time.Now())
	if lim != nil {
		return nil, &refused{status: http.StatusTooManyRequests, outcome: "limited", retry: lim.retryAfter,
			text: "connection to " + egressrule.Destination(d.Host, d.Port) + " refused: " + lim.text + " (limit " + lim.limit + "); retry later"}
	}
	ctx, cancel := context.WithTimeout(req.Context(), sp.p.cfg.Limits.HoldWait+2*sp.p.cfg.Limits.DialTimeout+30*time.Second)
	defer cancel()
	up, rf := sp.open(ctx, d)
	if rf != nil {
		release()
		return nil, rf
	}
	up.conn = &releasingConn{Conn: up.conn, release: release}
	return up, nil
}

// releasingConn gives its admission slot back once, when closed.
type releasingConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *releasingConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// CloseWrite half-closes the underlying TCP connection.
func (c *releasingConn) CloseWrite() error {
	if hc, ok := c.Conn.(halfCloser); ok {
		return hc.CloseWrite()
	}
	return c.Close()
}

// refuse answers a connection the proxy did not open, logs and counts it.
func (sp *sessionProxy) refuse(c net.Conn, start time.Time, d Dest, r *refused) {
	r.write(c)
	sp.p.cfg.Metrics.outcome(r.outcome, time.Since(start))
	sp.log.Info("egress connection refused", "host", d.Host, "port", d.Port, "outcome", r.outcome, "status", r.status,
		"hold", r.holdID, "why", r.text)
}

// closedLog is the one line an allowed connection leaves.
func (sp *sessionProxy) closedLog(d Dest, up *opened, out, in int64, life time.Duration, why string) {
	sp.p.cfg.Metrics.closed(out, in, life)
	sp.log.Info("egress connection closed", "host", d.Host, "port", d.Port, "address", up.addr.String(),
		"decision", up.decisionID, "bytes_out", out, "bytes_in", in, "duration", life.String(), "ended", why)
}
