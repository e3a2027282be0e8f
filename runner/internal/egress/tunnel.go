package egress

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// bufPool holds the copy buffers of tunnels (64 KiB: a socket read's worth
// at bulk rates, so a gigabit tunnel costs few system calls).
var bufPool = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// tunnel carries bytes both ways between the agent and its destination,
// counting them, until either side ends it, it is idle for the idle limit
// (no bytes either way), it has been open for the maximum, or it is cut.
type tunnel struct {
	client   net.Conn
	clientR  io.Reader // the client's reader (it may hold bytes already read)
	upstream net.Conn
	out, in  atomic.Int64 // bytes agent → destination, destination → agent
	last     atomic.Int64 // unix nanoseconds of the last byte either way
	ended    atomic.Value // why it ended first (string)
}

// halfCloser is a connection that can end one direction (TCP, unix).
type halfCloser interface{ CloseWrite() error }

// run carries the tunnel until it ends and says why.
func (t *tunnel) run(idle, maxLife time.Duration) string {
	t.last.Store(time.Now().UnixNano())
	timer := time.AfterFunc(maxLife, func() { t.end("open for the maximum time") })
	defer timer.Stop()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); t.pipe(t.upstream, t.client, t.clientR, &t.out, idle) }()
	go func() { defer wg.Done(); t.pipe(t.client, t.upstream, t.upstream, &t.in, idle) }()
	wg.Wait()
	t.end("closed")
	why, _ := t.ended.Load().(string)
	return why
}

// end closes both sides, recording the first reason given.
func (t *tunnel) end(why string) {
	t.ended.CompareAndSwap(nil, why)
	t.client.Close()
	t.upstream.Close()
}

// pipe copies src to dst. The source's read deadline is the idle limit; a
// deadline that passes while the other direction moved bytes is not idle.
// At src's end dst is half-closed, so the other direction can finish.
func (t *tunnel) pipe(dst, srcConn net.Conn, src io.Reader, count *atomic.Int64, idle time.Duration) {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	for {
		srcConn.SetReadDeadline(time.Now().Add(idle))
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				t.end("closed")
				return
			}
			count.Add(int64(n))
			t.last.Store(time.Now().UnixNano())
		}
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded):
			if time.Since(time.Unix(0, t.last.Load())) >= idle {
				t.end("idle")
				return
			}
		case errors.Is(err, io.EOF):
			if hc, ok := dst.(halfCloser); ok {
				hc.CloseWrite()
				return
			}
			t.end("closed")
			return
		default:
			t.end("closed")
			return
		}
	}
}
