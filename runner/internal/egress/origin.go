package egress

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// A request in origin form ("POST /v1/messages") is not for the proxy: it
// is for the session's other endpoint on the same socket, the model
// gateway (ANTHROPIC_BASE_URL and OPENAI_BASE_URL name the same loopback
// forwarder as HTTPS_PROXY). The connection is handed whole to an HTTP
// server with that endpoint's handler (keep-alive, streaming).

// isProxyRequest peeks at the request line: CONNECT, or an absolute URL.
func isProxyRequest(br *bufio.Reader) (bool, error) {
	for {
		b, _ := br.Peek(br.Buffered())
		if i := strings.IndexByte(string(b), '\n'); i >= 0 {
			f := strings.Fields(string(b[:i]))
			return len(f) >= 2 && (f[0] == http.MethodConnect || strings.Contains(f[1], "://")), nil
		}
		if br.Buffered() >= maxHead || br.Buffered() == br.Size() {
			return false, errors.New("the request line is too long")
		}
		if _, err := br.Peek(br.Buffered() + 1); err != nil {
			return false, err
		}
	}
}

// origin serves an origin-form connection with the session's handler.
func (sp *sessionProxy) origin(c net.Conn, br *bufio.Reader) {
	h := sp.p.cfg.Origin
	if h == nil {
		badRequest(errors.New("this socket is a proxy: send CONNECT host:port or an absolute http:// URL")).write(c)
		return
	}
	srv := &http.Server{Handler: h(sp.s), ReadHeaderTimeout: headerWait, IdleTimeout: 2 * time.Minute,
		ErrorLog: nil}
	ln := newOneConn(&readerConn{Conn: c, r: br})
	srv.Serve(ln) // returns once the connection is closed
}

// readerConn reads through a reader that may hold bytes already read.
type readerConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *readerConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// oneConn is a listener of one connection: Accept gives it, then waits
// until it is closed.
type oneConn struct {
	conn   net.Conn
	once   sync.Once
	closed chan struct{}
}

func newOneConn(c net.Conn) *oneConn {
	l := &oneConn{closed: make(chan struct{})}
	l.conn = &closeNotifyConn{Conn: c, closed: l.closed}
	return l
}

func (l *oneConn) Accept() (net.Conn, error) {
	var c net.Conn
	l.once.Do(func() { c = l.conn })
	if c != nil {
		return c, nil
	}
	<-l.closed
	return nil, net.ErrClosed
}

func (l *oneConn) Close() error   { return nil }
func (l *oneConn) Addr() net.Addr { return l.conn.LocalAddr() }

// closeNotifyConn closes a channel when closed (once).
type closeNotifyConn struct {
	net.Conn
	closed chan struct{}
	once   sync.Once
}

func (c *closeNotifyConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { close(c.closed) })
	return err
}
