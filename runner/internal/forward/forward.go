// Package forward is the in-container end of an agent's way out: it
// listens on the container's loopback (the only network it has) and
// carries each connection, byte for byte, to the runner's socket mounted
// into the container. It decides nothing: the runner's egress proxy and
// model endpoint behind the socket do. So HTTPS_PROXY=http://127.0.0.1:PORT
// and ANTHROPIC_BASE_URL=http://127.0.0.1:PORT work for any client.
package forward

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Forwarder accepts on a TCP listener and dials a unix socket for each
// connection.
type Forwarder struct {
	Listener net.Listener
	Socket   string
	Log      *slog.Logger
}

// Serve forwards until ctx ends or the listener is closed.
func (f *Forwarder) Serve(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		f.Listener.Close()
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := f.Listener.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.carry(c)
		}()
	}
}

// carry joins one accepted connection to a fresh connection to the socket.
// The runner's answer to a connection it cannot serve comes back the same
// way; a socket that does not answer closes the connection.
func (f *Forwarder) carry(c net.Conn) {
	defer c.Close()
	up, err := net.DialTimeout("unix", f.Socket, 10*time.Second)
	if err != nil {
		if f.Log != nil {
			f.Log.Warn("the runner's socket does not answer", "socket", f.Socket, "err", err)
		}
		return
	}
	defer up.Close()
	Join(c, up)
}

// halfCloser ends one direction of a connection (TCP and unix both can).
type halfCloser interface{ CloseWrite() error }

// Join copies both ways until both directions ended, half-closing each
// side when the other ended its direction.
func Join(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	one := func(dst, src net.Conn) {
		defer wg.Done()
		io.Copy(dst, src)
		if hc, ok := dst.(halfCloser); ok {
			hc.CloseWrite()
		} else {
			dst.Close()
		}
	}
	go one(a, b)
	go one(b, a)
	wg.Wait()
}
