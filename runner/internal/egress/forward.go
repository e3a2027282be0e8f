package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/clawguard/clawguard/proto/egressrule"
)

// hopHeaders are a proxy's own headers, never forwarded either way.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Expect"}

// stripHop removes the hop-by-hop headers, those a Connection header names
// included.
func stripHop(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			h.Del(strings.TrimSpace(name))
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}

// idleConn refreshes its deadline on every read and write: a plain HTTP
// exchange ends when nothing moved for the idle limit. It counts bytes.
type idleConn struct {
	net.Conn
	idle    time.Duration
	out, in *atomic.Int64
}

func (c *idleConn) Read(b []byte) (int, error) {
	c.Conn.SetDeadline(time.Now().Add(c.idle))
	n, err := c.Conn.Read(b)
	c.in.Add(int64(n))
	return n, err
}

func (c *idleConn) Write(b []byte) (int, error) {
	c.Conn.SetDeadline(time.Now().Add(c.idle))
	n, err := c.Conn.Write(b)
	c.out.Add(int64(n))
	return n, err
}

// forward carries one plain-HTTP request to its destination on a
// connection of its own (a decision of its own), with the decided host as
// Host and in origin form, and its response back; the client's connection
// is then closed, so every request it sends later is decided again.
func (sp *sessionProxy) forward(client net.Conn, req *http.Request, hosts []string) {
	start := time.Now()
	d, err := forwardTarget(req, hosts)
	if err != nil {
		sp.refuse(client, start, Dest{}, badRequest(err))
		return
	}
	up, rf := sp.admitAndOpen(req, d)
	if rf != nil {
		sp.refuse(client, start, d, rf)
		return
	}
	sp.p.cfg.Metrics.outcome("allowed", time.Since(start))
	var out, in atomic.Int64
	uc := &idleConn{Conn: up.conn, idle: sp.p.cfg.Limits.Idle, out: &out, in: &in}
	stop := sp.track(client, up.conn)
	defer stop()
	timer := time.AfterFunc(sp.p.cfg.Limits.MaxDuration, func() { up.conn.Close(); client.Close() })
	defer timer.Stop()

	outreq := req.Clone(req.Context())
	outreq.RequestURI, outreq.Close = "", true
	outreq.Host = egressrule.Destination(d.Host, d.Port)
	if d.Port == 80 {
		outreq.Host = strings.TrimSuffix(outreq.Host, ":80")
	}
	stripHop(outreq.Header)
	why := "closed"
	if err := outreq.Write(uc); err != nil {
		why = "request not sent: " + err.Error()
	} else if err := relayResponse(client, bufio.NewReader(uc), outreq); err != nil {
		why = err.Error()
	}
	up.conn.Close()
	sp.closedLog(d, up, out.Load(), in.Load(), time.Since(start), why)
}

// relayResponse reads the final response (1xx interim ones are skipped:
// the request went out whole) and writes it to the client, closing.
func relayResponse(client io.Writer, br *bufio.Reader, req *http.Request) error {
	for {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			r := &refused{status: http.StatusBadGateway, outcome: "failed", text: fmt.Sprintf("no response from %s: %v", req.Host, err)}
			r.write(client)
			return err
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 {
			resp.Body.Close()
			continue
		}
		defer resp.Body.Close()
		stripHop(resp.Header)
		resp.Close = true
		return resp.Write(client)
	}
}
