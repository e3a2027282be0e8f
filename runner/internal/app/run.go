package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/clawguard/clawguard/proto/failover"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/connect"
	"github.com/clawguard/clawguard/runner/internal/sessions"
)

// Run registers, cleans up orphans, opens the configured sessions and
// serves until ctx ends.
func (r *Runner) Run(ctx context.Context) error {
	defer func() { // last: the spans of the shutdown included
		if err := r.tracing.ShutdownWithin(5 * time.Second); err != nil {
			r.Log.Warn("flushing traces failed", "err", err)
		}
	}()
	defer r.Conn.Close()
	defer r.holdsDone.Close()
	// The probe runs from the first call on: a replica that hangs at
	// registration is left for another too.
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	go r.book.Watch(wctx, r.Conn)
	if err := r.prepare(ctx); err != nil {
		return err
	}
	defer r.applied.Close()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The Connect stream outlives ctx by a moment: a clean stop releases the
	// lease on it before it closes.
	cctx, ccancel := context.WithCancel(context.WithoutCancel(ctx))
	defer ccancel()
	var fatal error // a refused re-registration stops the runner with it
	r.connect = r.connectClient(func(err error) { fatal = err; cancel() })
	// A GOAWAY (a replica stopping, or a connection past its maximum age)
	// or a replica left: both streams are made again on the new connection.
	go failover.FollowMoves(ctx, r.Conn, func(left time.Time) {
		d, c := r.Decide.RestartIfBefore(left), r.connect.RestartIfBefore(left)
		if d || c {
			r.Log.Info("connection moved; streams made again on the new one")
		}
	})
	go r.Decide.Run(ctx)
	go r.lease.Run(ctx)
	connDone := make(chan struct{})
	go func() { r.connect.Run(cctx); close(connDone) }()
	go r.Sessions.IdleLoop(ctx, r.Config.IdleAfter, min(r.Config.IdleAfter/4+time.Second, time.Minute))
	go r.MCP.IdleLoop(ctx, time.Minute)
	go r.Sessions.LivenessLoop(ctx, min(r.Config.InboxAckDeadline/4+100*time.Millisecond, 30*time.Second))
	stopMetrics, err := r.serveMetrics()
	if err != nil {
		return err
	}
	defer stopMetrics()

	// Sessions whose durable inbox still holds items from before a restart.
	r.Sessions.Resume(ctx)
	go r.openGroups(ctx)
	r.Log.Info("runner started", "id", r.Config.ID, "runtime", r.Runtime.Name(), "server", r.Config.Server,
		"actions", r.Actions.Names())
	<-ctx.Done()
	r.stop(fatal == nil)
	ccancel()
	<-connDone
	return fatal
}

// prepare registers, removes what an earlier run left behind and opens the
// record of the pushes applied.
func (r *Runner) prepare(ctx context.Context) (err error) {
	if err := r.Register(ctx); err != nil {
		return err
	}
	if n, err := r.Runtime.RemoveOrphans(ctx); err != nil {
		return fmt.Errorf("remove orphans: %w", err)
	} else if n > 0 {
		r.Log.Info("removed orphan agents of an earlier run", "count", n)
	}
	r.applied, err = connect.OpenApplied(filepath.Join(r.Config.DataDir, "pushes-applied.log"), 0)
	return err
}

// connectClient is the Connect stream's client: every reconnect but the
// first registers again and releases the sessions moved away meanwhile; a
// refused re-registration is fatal (told to stop).
func (r *Runner) connectClient(stop func(error)) *connect.Client {
	c := &connect.Client{
		Registry: r.regCli, RunnerID: r.Config.ID, InstanceID: r.instanceID, Applied: r.applied, Applier: r.Sessions,
		Heartbeat: r.heartbeat, Log: r.Log,
		OnConnected: func(up bool) { r.setUp(1, up) },
		OnReconnect: r.Metrics.StreamReconnectsTotal.Inc,
		OnApplied:   r.Metrics.PushesAppliedTotal.Inc,
		OnRenewed:   r.lease.Renewed,
	}
	first := true
	c.BeforeConnect = func(ctx context.Context) error {
		if first {
			first = false
			return nil
		}
		var ce *ConformanceError
		if err := r.Register(ctx); errors.As(err, &ce) {
			r.Log.Error("re-registration refused", "err", err)
			stop(err)
			return err
		} else if err != nil {
			return err
		}
		r.Sessions.Reconcile(ctx) // sessions moved away while the lease was lost
		return nil
	}
	return c
}

// serveMetrics serves /metrics, /healthz and /readyz on --metrics-listen
// (nothing when it is empty); the func stops it.
func (r *Runner) serveMetrics() (func(), error) {
	if r.Config.MetricsListen == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", r.Config.MetricsListen)
	if err != nil {
		return nil, fmt.Errorf("--metrics-listen: %w", err)
	}
	srv := &http.Server{Handler: metricsMux(r.registry, r.ready), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	r.Log.Info("metrics listening", "addr", ln.Addr().String())
	return func() { srv.Close() }, nil
}

// stop stops every agent and MCP server and, on a clean stop, gives the
// lease up so this id can start again at once.
func (r *Runner) stop(clean bool) {
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	r.Sessions.Shutdown(sctx)
	r.MCP.Close()
	if !clean {
		return
	}
	rctx, rcancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer rcancel()
	if err := r.connect.Release(rctx); err != nil {
		r.Log.Warn("lease not released; a restart waits for it to expire", "err", err)
	} else {
		r.Log.Info("lease released")
	}
}

// OpenSession opens (or gets) the group's session on this runner and starts its agent.
func (r *Runner) OpenSession(ctx context.Context, group string) (*sessions.Session, error) {
	resp, err := r.regCli.OpenSession(ctx, &guardv1.OpenSessionRequest{AgentGroupId: group})
	if err != nil {
		return nil, fmt.Errorf("open session: %w", err)
	}
	return r.Sessions.Open(ctx, resp.GetSession(), resp.GetGroup())
}
