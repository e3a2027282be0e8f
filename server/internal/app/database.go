package app

import (
	"context"
	"sync"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/clawguard/clawguard/migrations"
	"github.com/clawguard/clawguard/server/internal/authn"
	"github.com/clawguard/clawguard/server/internal/store"
)

// How often the replica looks at its database: the schema (health follows
// it) and the replication state (the gauges, /readyz?verbose and a warning
// when acknowledged approvals could be lost in a failover).
const (
	schemaEvery      = 2 * time.Second
	replicationEvery = 10 * time.Second
)

// dbState is what the last look found, for /readyz.
type dbState struct {
	mu sync.Mutex
	// notServing says why health is NOT_SERVING ("" while SERVING).
	notServing string
	// replication is store.Replication.Words() of the last read ("" before it).
	replication string
}

func (d *dbState) set(f func(*dbState)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f(d)
}

func (d *dbState) get() (notServing, replication string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.notServing, d.replication
}

// watchDatabase flips health to SERVING once the schema is at the version
// this binary needs, and back to NOT_SERVING if it ever is not, saying which:
// a database that cannot be reached is not a schema that is behind. Every
// replicationEvery it reads the replication state.
func (s *Server) watchDatabase(ctx context.Context) error {
	t := time.NewTicker(schemaEvery)
	defer t.Stop()
	last, lastWhy := healthpb.HealthCheckResponse_UNKNOWN, ""
	var lastRepl time.Time
	lastMode := ""
	for {
		current, err := migrations.Current(ctx, s.deps.Store.Pool)
		st, why := healthpb.HealthCheckResponse_SERVING, ""
		switch {
		case err != nil && ctx.Err() != nil:
			return nil
		case err != nil && store.IsUnavailable(err):
			st, why = healthpb.HealthCheckResponse_NOT_SERVING, "database unreachable"
		case err != nil:
			st, why = healthpb.HealthCheckResponse_NOT_SERVING, "schema version unreadable"
		case !current:
			st, why = healthpb.HealthCheckResponse_NOT_SERVING, "schema not current (run clawguard-server migrate)"
		}
		if why != lastWhy {
			switch {
			case why == "database unreachable":
				s.log.Warn("the database cannot be reached; NOT_SERVING until it answers", "err", err)
			case why != "":
				s.log.Warn(why+"; NOT_SERVING", "err", err)
			case lastWhy != "":
				s.log.Info("the database answers and the schema is current; SERVING", "was", lastWhy)
			}
			lastWhy = why
			s.db.set(func(d *dbState) { d.notServing = why })
		}
		if st == healthpb.HealthCheckResponse_SERVING && last != st && s.cfg.OperatorTokenFile != "" {
			if err := authn.EnsureOperatorToken(ctx, s.deps.Store.Pool, s.cfg.OperatorTokenFile); err != nil {
				s.log.Error("register operator token", "err", err)
			}
		}
		if st != last {
			for _, svc := range []string{"", "guard.v1.Guard", "guard.v1.Approvals", "guard.v1.Registry"} {
				s.health.SetServingStatus(svc, st)
			}
			last = st
		}
		if err == nil && time.Since(lastRepl) >= replicationEvery {
			lastRepl = time.Now()
			lastMode = s.checkReplication(ctx, lastMode)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// checkReplication reads the replication state, sets the gauges, and logs
// when the mode changes: a warning whenever an acknowledged approval could
// be lost (or not written) in a failover, info when it could not.
func (s *Server) checkReplication(ctx context.Context, lastMode string) string {
	r, err := store.ReadReplication(ctx, s.deps.Store.Pool)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("could not read the database's replication state", "err", err)
		}
		return lastMode
	}
	mode, words := r.Mode(), r.Words()
	s.deps.Metrics.ObserveReplication(mode, r.Synchronous)
	s.db.set(func(d *dbState) { d.replication = words })
	if mode != lastMode {
		attrs := []any{"mode", mode, "standbys", r.Standbys, "synchronous", r.Synchronous,
			"synchronous_standby_names", r.StandbyNames, "synchronous_commit", r.Commit}
		switch mode {
		case store.ReplicationSynchronous, store.ReplicationNone:
			// A single node has no failover to lose a commit in.
			s.log.Info("database replication: "+words, attrs...)
		default:
			s.log.Warn("database replication: "+words+"; the delivery guarantee needs a synchronous standby (RELIABILITY.md)", attrs...)
		}
	}
	return mode
}
