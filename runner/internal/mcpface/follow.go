package mcpface

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
	"github.com/clawguard/clawguard/proto/retry"
)

// The runner's inbox stream, followed for as long as clawguard-mcp runs:
// each item queued on disk, then acknowledged.

// takeOverQueue waits for the clawguard-mcp holding the queue to exit,
// then opens it and follows the inbox.
func (f *Face) takeOverQueue(ctx context.Context) {
	delays := retry.Exponential(time.Second, 5*time.Second)
	for {
		t := time.NewTimer(delays.NextBackOff())
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		q, unread, err := openQueue(f.cfg.QueuePath, f.cfg.QueueMax, f.cfg.QueueMaxBytes)
		if errors.Is(err, errQueueLocked) {
			continue
		}
		if err != nil {
			f.log.Warn("clawguard-mcp: open the inbox queue", "err", err)
			continue
		}
		f.inbox.open(q, unread)
		f.log.Info("clawguard-mcp: took the inbox queue over", "path", f.cfg.QueuePath)
		go f.acks.run(ctx)
		f.followInbox(ctx)
		return
	}
}

// followInbox reads the session's inbox stream for as long as ctx lives,
// reconnecting (and re-reading the tools: the runner may have restarted)
// when it ends. It asks for acknowledged delivery: the runner keeps an
// item until its ack, and sends what it holds unacknowledged first on
// every new stream.
func (f *Face) followInbox(ctx context.Context) {
	delays := retry.Exponential(200*time.Millisecond, 5*time.Second)
	for first := true; ctx.Err() == nil; first = false {
		if !first {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if err := f.Refresh(rctx); err != nil {
				f.log.Debug("clawguard-mcp: refresh tools", "err", err)
			}
			cancel()
		}
		err := f.readStream(ctx, func() { delays.Reset() })
		if ctx.Err() != nil {
			return
		}
		d := delays.NextBackOff()
		f.log.Debug("clawguard-mcp: inbox stream ended; reconnecting", "err", err, "in", d)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// readStream reads one inbox stream until it ends, or until an item cannot
// be written to the queue (the stream is given up, unacknowledged: the
// next one brings the item again).
func (f *Face) readStream(ctx context.Context, progress func()) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := f.cfg.Gateway.Inbox(sctx, &agentv1.InboxRequest{Acknowledges: true}, grpc.WaitForReady(true))
	if err != nil {
		return err
	}
	for {
		r, err := stream.Recv()
		if err != nil {
			return err
		}
		progress()
		if err := f.take(sctx, r); err != nil {
			if ctx.Err() == nil {
				f.log.Warn("clawguard-mcp: inbox item not queued (the runner keeps it)", "err", err)
			}
			return err
		}
	}
}

// take puts one inbox item from the runner into the queue and, once it is
// there, acknowledges it. A runner that gives no item_id (one from before
// acknowledgements) takes an item once it is sent: nothing to ack.
func (f *Face) take(ctx context.Context, r *agentv1.InboxResponse) error {
	id := itemID(r)
	var err error
	if r.GetNotice().GetKind() == agentv1.NoticeKind_NOTICE_KIND_TOOLS_CHANGED {
		err = f.inbox.consumed(id)
		go func() {
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := f.Refresh(rctx)
			cancel()
			if err != nil && ctx.Err() == nil {
				f.log.Warn("clawguard-mcp: refresh tools after tools changed; trying again", "err", err)
				f.refreshUntilLoaded(ctx)
			}
		}()
	} else {
		err = f.inbox.add(ctx, id, r)
	}
	if err != nil {
		return err
	}
	if r.GetItemId() != "" {
		f.acks.add(r.GetItemId())
	}
	return nil
}
