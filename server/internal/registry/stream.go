package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/fault"
	"github.com/clawguard/clawguard/server/internal/pushes"
	"github.com/clawguard/clawguard/server/internal/store"
)

// Stream is the server side of Registry.Connect.
type Stream interface {
	Context() context.Context
	Send(*guardv1.ConnectResponse) error
	Recv() (*guardv1.ConnectRequest, error)
}

// Connect serves a runner's stream. The first frame must be hello naming
// the token's runner and its registered instance; then the runner's unacked
// pushes are sent (oldest first, at most PushWindow in flight) and new ones
// as they arrive; acks mark pushes applied and open the window again, a push
// left unacknowledged past AckDeadline is sent again on the same stream,
// heartbeats renew the lease, and a release frame gives the lease up.
func (s *Service) Connect(stream Stream, tokenRunnerID string) (err error) {
	defer store.Faulted(&err, "runner stream")
	ctx := stream.Context()
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	hello := first.GetHello()
	switch {
	case hello == nil:
		return fault.New(fault.Invalid, "hello: the first frame must be hello{runner_id, instance_id}")
	case hello.GetRunnerId() != tokenRunnerID:
		return fault.New(fault.Denied, "this token is bound to runner %q, not %q", tokenRunnerID, hello.GetRunnerId())
	}
	runnerID, instanceID := hello.GetRunnerId(), hello.GetInstanceId()
	if _, err := s.renew(ctx, runnerID, instanceID); err != nil {
		return err
	}
	s.log.InfoContext(ctx, "runner connected", "runner", runnerID)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Sends come from both loops; none may happen once the handler returns.
	var (
		sendMu sync.Mutex
		closed bool
	)
	send := func(r *guardv1.ConnectResponse) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		if closed {
			return context.Canceled
		}
		return stream.Send(r)
	}
	wake, unsubscribe := s.hub.subscribe(runnerID)
	defer unsubscribe()

	// The runner's answers, for the push loop: an ack frees a window slot,
	// a failure makes the push due again at the next scan.
	answers := make(chan pushAnswer, 4*s.opts.PushWindow)
	pushErr := make(chan error, 1)
	go func() { pushErr <- s.pushLoop(ctx, runnerID, wake, answers, send) }()
	// Acks are written by a goroutine of their own, as many as queued in
	// one statement: written one at a time by the read loop, each with its
	// commit, they fell behind 100 approvals a second on a saturated
	// machine, the window filled with acked pushes, and new pushes waited
	// seconds. An ack lost with the stream is harmless: the push is sent
	// again and the runner acks a duplicate without applying it twice.
	acks := make(chan ackReq, 4*s.opts.PushWindow)
	ackErr := make(chan error, 1)
	go func() { ackErr <- s.ackWriter(ctx, runnerID, acks, answers) }()
	recvErr := make(chan error, 1)
	// Recv unblocks when the handler returns (the stream ends).
	go func() { recvErr <- s.recvLoop(ctx, runnerID, instanceID, stream, acks, answers, send) }()

	var result error
	select {
	case result = <-recvErr:
		// The acks read before the stream ended are written before the
		// handler returns (a heartbeat and a release wait for them too).
		if err := <-ackErr; err != nil && result == nil {
			result = err
		}
		cancel()
		<-pushErr
	case result = <-pushErr:
		cancel()
	case result = <-ackErr:
		cancel()
		<-pushErr
	}
	sendMu.Lock()
	closed = true
	sendMu.Unlock()
	if errors.Is(result, io.EOF) || errors.Is(result, errReleased) {
		result = nil
	}
	s.log.InfoContext(ctx, "runner disconnected", "runner", runnerID, "err", result)
	return result
}

// errReleased ends a stream whose runner released its lease.
var errReleased = errors.New("lease released")

// pushAnswer is the runner's answer to one push: done (acked or given up),
// or failed and due again.
type pushAnswer struct {
	id   string
	done bool
}

func (s *Service) recvLoop(ctx context.Context, runnerID, instanceID string, stream Stream, acks chan<- ackReq, answers chan<- pushAnswer, send func(*guardv1.ConnectResponse) error) error {
	defer close(acks) // ackWriter writes what is queued, then ends
	for {
		req, err := stream.Recv()
		if err != nil {
			return err
		}
		switch f := req.GetFrame().(type) {
		case *guardv1.ConnectRequest_Ack:
			if f.Ack.GetOk() && f.Ack.GetPushId() != "" {
				select {
				case acks <- ackReq{id: f.Ack.GetPushId()}:
				case <-ctx.Done():
					return ctx.Err()
				}
				continue
			}
			again, err := s.ack(ctx, runnerID, f.Ack)
			if err != nil {
				return err
			}
			select {
			case answers <- pushAnswer{id: f.Ack.GetPushId(), done: !again}:
			default: // the push loop is behind; its next scan sees the table
			}
		case *guardv1.ConnectRequest_Heartbeat:
			// The acks before it are stored before it is answered.
			if err := acksWritten(ctx, acks); err != nil {
				return err
			}
			expires, err := s.renew(ctx, runnerID, instanceID)
			if err != nil {
				return err
			}
			if err := send(&guardv1.ConnectResponse{Frame: &guardv1.ConnectResponse_Lease{Lease: &guardv1.LeaseRenewed{ExpiresAt: timestamppb.New(expires), Ttl: durationpb.New(s.opts.LeaseTTL)}}}); err != nil {
				return err
			}
		case *guardv1.ConnectRequest_Release:
			// What this runner applied is recorded before the lease goes,
			// so its sessions' next runner is not sent it — also when the
			// runner hangs up right after the frame, as release does.
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackWriteTimeout)
			err := acksWritten(wctx, acks)
			cancel()
			if err != nil {
				return err
			}
			if err := s.release(ctx, runnerID, instanceID); err != nil {
				return err
			}
			return errReleased
		case *guardv1.ConnectRequest_Hello:
			return fault.New(fault.Invalid, "hello: sent twice")
		default:
			return fault.New(fault.Invalid, "frame: empty or unknown")
		}
	}
}

// pushLoop sends the runner's unacked pushes: on start, on every wake-up,
// whenever acks free half the window, and every RescanInterval. At most
// PushWindow pushes are in flight; one unacknowledged past AckDeadline is
// sent again on this same stream (at-least-once; the runner applies by id
// and acks a duplicate without applying it twice).
func (s *Service) pushLoop(ctx context.Context, runnerID string, wake <-chan struct{}, answers <-chan pushAnswer, send func(*guardv1.ConnectResponse) error) error {
	sent := map[string]time.Time{} // push id → when last sent on this stream
	// Scan often enough that an overdue push goes out again near its deadline.
	t := time.NewTicker(min(s.opts.RescanInterval, s.opts.AckDeadline/2))
	defer t.Stop()
	for {
		list, err := s.pending(ctx, runnerID)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("read pushes: %w", err)
		}
		now := time.Now()
		still := make(map[string]bool, len(list))
		for _, p := range list {
			still[p.GetId()] = true
		}
		// Forget what was acked or moved away.
		for id := range sent {
			if !still[id] {
				delete(sent, id)
			}
		}
		inFlight := 0
		for _, at := range sent {
			if now.Sub(at) < s.opts.AckDeadline {
				inFlight++
			}
		}
		var out []*guardv1.Push
		var outIDs []string
		resent := 0
		// backlog: pushes are left unsent (the window is full, or there are
		// more than one read returns), so acks that free the window are a
		// reason to read again; otherwise the next push comes with a wake-up.
		backlog := len(list) >= maxPendingRead
		for _, p := range list {
			if inFlight >= s.opts.PushWindow {
				backlog = true
				break
			}
			at, ok := sent[p.GetId()]
			if ok && now.Sub(at) < s.opts.AckDeadline {
				continue // in flight, not due yet
			}
			if ok {
				resent++
			}
			out = append(out, p)
			outIDs = append(outIDs, p.GetId())
			inFlight++
		}
		if resent > 0 {
			s.log.WarnContext(ctx, "pushes unacknowledged past the deadline; sending them again", "runner", runnerID, "count", resent, "deadline", s.opts.AckDeadline)
		}
		if len(out) > 0 {
			// Counted before sending: attempts is how often a push went out.
			if err := pushes.Sending(ctx, s.pool, outIDs); err != nil && ctx.Err() == nil {
				s.log.WarnContext(ctx, "count push attempts", "err", err)
			}
		}
		for _, p := range out {
			if err := send(&guardv1.ConnectResponse{Frame: &guardv1.ConnectResponse_Push{Push: p}}); err != nil {
				return err
			}
			sent[p.GetId()] = now
		}
		// Wait for a wake-up, the rescan tick, or (with a backlog) acks that
		// free half the window. A failed push is due again at the next scan,
		// not at once: a failing push must not spin.
		freed := 0
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				return nil
			case <-wake:
				waiting = false
			case <-t.C:
				waiting = false
			case a := <-answers:
				if _, ok := sent[a.id]; ok {
					delete(sent, a.id)
					if a.done && backlog {
						if freed++; freed >= max(1, s.opts.PushWindow/2) || len(sent) == 0 {
							waiting = false
						}
					}
				}
			}
		}
	}
}

// maxPendingRead bounds one read of a runner's unacked pushes.
const maxPendingRead = 1000

// pending is the runner's unacked pushes, oldest first (at most maxPendingRead).
func (s *Service) pending(ctx context.Context, runnerID string) ([]*guardv1.Push, error) {
	return pushes.Pending(ctx, s.pool, runnerID, maxPendingRead)
}

// MaxPushAttempts is how often a push the runner fails to apply is sent
// before the server gives up on it (recorded with the runner's last error).
const MaxPushAttempts = 5

// release gives up the lease of (runnerID, instanceID): another instance of
// the same runner may register at once. The lease's expiry is left as it is,
// so the runner's sessions only move if it does not come back in time.
func (s *Service) release(ctx context.Context, runnerID, instanceID string) error {
	// The runner may hang up right after the frame: finish the release anyway.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	tag, err := s.pool.Exec(ctx, `UPDATE runners SET instance_id = '' WHERE id = $1 AND instance_id = $2`, runnerID, instanceID)
	if err != nil {
		return fmt.Errorf("release lease of %s: %w", runnerID, err)
	}
	if tag.RowsAffected() == 1 {
		s.log.InfoContext(ctx, "runner released its lease", "runner", runnerID)
	}
	return nil
}

const (
	// maxAckBatch bounds the acks one statement writes.
	maxAckBatch = 256
	// ackWriteTimeout bounds one ack statement, which outlives a runner
	// that hung up after its acks (they are still worth storing).
	ackWriteTimeout = 10 * time.Second
)

// ackReq is a successful ack for ackWriter, or (no id) a barrier: written
// is answered once every ack queued before it is stored.
type ackReq struct {
	id      string
	written chan error
}

// acksWritten waits until the acks queued so far are stored.
func acksWritten(ctx context.Context, acks chan<- ackReq) error {
	b := ackReq{written: make(chan error, 1)}
	select {
	case acks <- b:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-b.written:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ackWriter records the runner's successful acks, every ack queued since
// the last statement in one, and tells the push loop each push is done.
// It ends once acks is closed and what was queued is written.
func (s *Service) ackWriter(ctx context.Context, runnerID string, acks <-chan ackReq, answers chan<- pushAnswer) error {
	ids := make([]string, 0, maxAckBatch)
	var barriers []chan error
	for {
		r, open := <-acks
		if !open {
			return nil
		}
		ids, barriers = ids[:0], barriers[:0]
		take := func(r ackReq) {
			if r.written != nil {
				barriers = append(barriers, r.written)
			} else {
				ids = append(ids, r.id)
			}
		}
		take(r)
	queued:
		for open && len(ids) < maxAckBatch {
			select {
			case r, open = <-acks:
				if open {
					take(r)
				}
			default:
				break queued
			}
		}
		var err error
		if len(ids) > 0 {
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackWriteTimeout)
			err = pushes.Acked(wctx, s.pool, runnerID, ids)
			cancel()
			if err != nil {
				err = fmt.Errorf("ack %d pushes: %w", len(ids), err)
			}
		}
		for _, b := range barriers {
			b <- err
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if !open {
			return nil
		}
		for _, id := range ids {
			select {
			case answers <- pushAnswer{id: id, done: true}:
			default: // the push loop is behind; its next scan sees the table
			}
		}
	}
}

// ack records the runner's failure answer to a push of its own (an unknown
// id or another runner's push is ignored — the runner may answer after a
// move; a successful ack goes to ackWriter): it records the error and
// leaves the push pending, to be sent again (again = true) until
// MaxPushAttempts.
func (s *Service) ack(ctx context.Context, runnerID string, a *guardv1.PushAck) (again bool, err error) {
	if a.GetPushId() == "" {
		return false, fault.New(fault.Invalid, "ack.push_id: required")
	}
	errText := a.GetError()
	if errText == "" {
		errText = "runner reported failure"
	}
	found, gaveUp, err := pushes.Failed(ctx, s.pool, runnerID, a.GetPushId(), errText, MaxPushAttempts)
	if err != nil || !found {
		return false, err
	}
	if gaveUp {
		s.log.WarnContext(ctx, "push abandoned after repeated failures", "push", a.GetPushId(), "runner", runnerID, "attempts", MaxPushAttempts, "err", errText)
		return false, nil
	}
	return true, nil
}
