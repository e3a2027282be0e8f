package failover

import (
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Watch probes the replica in use until ctx ends or conn is closed: grpc.health.v1 Check
// every Options.Probe, each bounded by Options.ProbeTimeout. Two answers
// missing in a row (a replica that hangs, or a path that drops every
// packet) avoid that replica and close its connections; NOT_SERVING avoids
// it while another replica is available (its connections closed only then).
func (b *Book) Watch(ctx context.Context, conn grpc.ClientConnInterface) {
	hc := healthpb.NewHealthClient(conn)
	missed := 0
	for ctx.Err() == nil {
		var p peer.Peer
		pctx, cancel := context.WithTimeout(ctx, b.opts.ProbeTimeout)
		resp, err := hc.Check(pctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p))
		cancel()
		if ctx.Err() != nil || closed(conn) {
			return
		}
		addr := ""
		if p.Addr != nil {
			addr = p.Addr.String()
		}
		switch {
		case status.Code(err) == codes.DeadlineExceeded:
			if missed++; missed >= 2 {
				missed = 0
				b.avoidHung(addr)
			}
			continue // ask again at once: the next miss decides
		case err == nil && resp.GetStatus() != healthpb.HealthCheckResponse_SERVING && addr != "":
			b.mu.Lock()
			other := b.otherAvailableLocked(addr)
			b.mu.Unlock()
			if other {
				b.Avoid(addr, "replica not serving ("+resp.GetStatus().String()+")", true)
			}
		}
		missed = 0
		t := time.NewTimer(b.opts.Probe)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// closed reports whether conn was closed (Watch then ends with it).
func closed(conn grpc.ClientConnInterface) bool {
	c, ok := conn.(interface{ GetState() connectivity.State })
	return ok && c.GetState() == connectivity.Shutdown
}

// avoidHung avoids the replica whose probe went unanswered: the probe's
// peer, else every address with an open connection (pick_first keeps one).
func (b *Book) avoidHung(addr string) {
	const why = "no answer to two health probes in a row"
	if addr != "" {
		b.Avoid(addr, why, true)
		return
	}
	for _, a := range b.openAddrs() {
		b.Avoid(a, why, true)
	}
}

// unaryDeadline gives a unary call without a deadline Options.UnaryTimeout.
func (b *Book) unaryDeadline(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.opts.UnaryTimeout)
		defer cancel()
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// streamStopping watches each stream's end for the stopping trailer.
func (b *Book) streamStopping(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, err
	}
	return &watched{ClientStream: s, book: b}, nil
}

// watched is a client stream whose end is looked at once.
type watched struct {
	grpc.ClientStream
	book *Book
	seen bool
}

func (w *watched) RecvMsg(m any) error {
	err := w.ClientStream.RecvMsg(m)
	if err != nil && !w.seen {
		w.seen = true
		w.ended(err)
	}
	return err
}

// ended avoids the replica that ended the stream because it is stopping.
// Its connections stay open: the replica's GOAWAY drains them, and calls
// in flight on them finish.
func (w *watched) ended(err error) {
	if errors.Is(err, io.EOF) || len(w.Trailer().Get(StoppingKey)) == 0 {
		return
	}
	p, ok := peer.FromContext(w.Context())
	if !ok || p.Addr == nil {
		return
	}
	w.book.Avoid(p.Addr.String(), "replica stopping", false)
}

// FollowMoves calls moved each time the connection is READY again after it
// left READY (at left): its replica sent GOAWAY (stopping, or a connection
// past the server's maximum age — how a fleet spreads over the replicas
// again after a restart) or was avoided. Streams opened before left are on
// the old connection; moved restarts them on the new one. It ends with ctx.
func FollowMoves(ctx context.Context, conn *grpc.ClientConn, moved func(left time.Time)) {
	for {
		s := conn.GetState()
		if s == connectivity.Shutdown || !conn.WaitForStateChange(ctx, s) {
			return
		}
		if s != connectivity.Ready {
			continue
		}
		left := time.Now()
		for st := conn.GetState(); st != connectivity.Ready; st = conn.GetState() {
			if st == connectivity.Idle {
				conn.Connect()
			}
			if st == connectivity.Shutdown || !conn.WaitForStateChange(ctx, st) {
				return
			}
		}
		moved(left)
	}
}
