package guard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/fault"
)

// ErrActorNotOwned: a runner named an agent actor on a session it does not
// host (or of another group). Nothing is logged; the engine answers a
// Denied fault wrapping it (notOwned).
var ErrActorNotOwned = errors.New("actor is not an agent on a session this runner hosts")

// notOwned is the fault of a runner acting for a session it does not host.
func notOwned(req *Request) error {
	return fault.Wrap(fault.Denied, ErrActorNotOwned, "runner %q does not host session %q of group %q",
		req.RunnerID, req.Session(), req.Actor.GetAgent().GetAgentGroupId())
}

// ErrUnavailable: a grant-carrying decision could not be made for an
// infrastructure reason (database unreachable, the decision log refusing
// writes, a timeout). Nothing was decided and the grant is untouched, so the
// replay must be tried again, not taken as a final DENY (an approved action
// would be lost). The API answers Unavailable with a retry hint. Decisions
// without a grant still fail closed as DENY.
var ErrUnavailable = errors.New("the guard could not decide (retryable)")

// RetryAfter is the back-off the API suggests with ErrUnavailable.
const RetryAfter = time.Second

// unavailable is the fault of a replay the guard could not decide for an
// infrastructure reason (it wraps ErrUnavailable).
func unavailable(cause error) error {
	return fault.Unavailablef(RetryAfter, fmt.Errorf("%w: %v", ErrUnavailable, cause),
		"the guard could not decide this replay right now; nothing was decided and the grant is unused: retry")
}

// Engine is the decision function with its storage. A decision is a
// pipeline, one way through: plan (the catalog entry looked up once) →
// read (the first fact source that serves the plan) → judge (pure) →
// record (the write it needs, and the one outcome switch).
type Engine struct {
	Catalog *Catalog
	pool    *pgxpool.Pool
	log     *slog.Logger
	// sources are asked in order: the replica's copy, when there is one,
	// then the database.
	sources []factSource
	batches *batcher // the database work of concurrent decisions, sent as batches
	holds   HoldCreator
	reach   HoldReach // a dry run's check that its hold could be made
	// standing, when set, is asked before a hold is created (hold).
	standing StandingFinder
	approved ApprovedFinder
	consume  *consumeStatements // nil: no grant can be consumed

	observeDecision func(action, effect string, took time.Duration)
	// observeQuery counts dry runs and reads apart (kind "dry_run", "read").
	observeQuery func(action, effect, kind string, took time.Duration)
	// observeMode counts decisions a mode relaxed; warn tells of warn-mode ones.
	observeMode func(action, mode, wouldEffect string)
	warn        func(ctx context.Context, w Warning)
	snap        Snapshot
	// observeSnapshot counts decisions answered from the snapshot
	// ("snapshot") and those whose revision check failed ("stale").
	observeSnapshot func(outcome string)
	nonCatalog      [4]string // the facts statement of actions outside the catalog
}

// Options configure an Engine.
type Options struct {
	Log *slog.Logger
	// Observe counts a decision (metrics); action is "non_catalog" for
	// actions outside the catalog so label values stay bounded.
	Observe func(action, effect string, took time.Duration)
	// ObserveQuery counts what Observe must not: dry runs and reads, which
	// change nothing (kind "dry_run" or "read").
	ObserveQuery func(action, effect, kind string, took time.Duration)
	// Batchers is the number of concurrent batch senders (default 1;
	// --guard-pipelines).
	Batchers int
	// Yield lets a sender yield once before sending, so decisions that
	// are runnable at that moment join the batch.
	Yield bool
	// DirectReads reads each decision's facts on its own pooled
	// connection instead of through the batcher (for comparison).
	DirectReads bool
	// ObserveMode counts decisions an audit or warn mode let through, by
	// the effect enforce would have given.
	ObserveMode func(action, mode, wouldEffect string)
	// Warn is called after a warn-mode decision is logged (best effort:
	// the action runs whether or not the warning is delivered).
	Warn func(ctx context.Context, w Warning)
	// Holds creates a HOLD's hold in the decision's transaction (the
	// approvals service); nil: a HOLD reports that holds cannot be created.
	Holds HoldCreator
	// HoldReach says why a dry run's hold could not be made now, so `ncl
	// explain` answers what the decision would (Unheld); nil: not checked.
	HoldReach HoldReach
	// Standing finds a live standing grant matching a hold about to be
	// created exactly; the decision is then an ALLOW decided by "standing
	// grant" and no hold is made. Nil: every approval is once.
	Standing StandingFinder
	// Approved finds the approved, unused hold an entry marked
	// NextRequestUses left for the session's next identical request; the
	// engine consumes it with the ALLOW's log row. Nil: such a request is
	// held again.
	Approved ApprovedFinder
	// ConsumeHold is the hold owner's consume transition (approvals.Consume):
	// the engine runs it in the statement that logs a replay's ALLOW. Nil:
	// no grant can be consumed (a replay is denied).
	ConsumeHold func(decision, hold, kind string) string
	// Snapshot, when set, is the replica's copy of the tables the lookups
	// read: decisions it can settle skip the facts read (decideFromSnapshot).
	Snapshot Snapshot
	// ObserveSnapshot counts decisions answered from the snapshot
	// ("snapshot") and those sent live by a failed revision check ("stale").
	ObserveSnapshot func(outcome string)
	// ObserveBatch is told of each batch: its facts reads, its log
	// rows and its round trip (metrics).
	ObserveBatch func(reads, rows int, took time.Duration)
	// LogPool, when set, carries the batcher's batches (the facts reads and
	// the log rows of plain decisions) instead of the pool: app gives it
	// connections with synchronous_commit off (see --decision-log-commit).
	LogPool *pgxpool.Pool
}

// NewEngine builds an engine; Close it after the last Decide.
func NewEngine(cat *Catalog, pool *pgxpool.Pool, o Options) *Engine {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	logPool := o.LogPool
	if logPool == nil {
		logPool = pool
	}
	e := &Engine{
		Catalog: cat, pool: pool, log: o.Log, observeDecision: o.Observe, nonCatalog: factsQueries(nil),
		observeMode: o.ObserveMode, observeQuery: o.ObserveQuery, warn: o.Warn, holds: o.Holds, standing: o.Standing, reach: o.HoldReach,
		approved: o.Approved,
		batches:  newBatcher(logPool, o.Log, o.Batchers, o.Yield),
		snap:     o.Snapshot, observeSnapshot: o.ObserveSnapshot,
	}
	e.batches.observe = o.ObserveBatch
	if o.ConsumeHold != nil {
		e.consume = newConsumeStatements(o.ConsumeHold)
	}
	if e.snap != nil {
		var mirrored []string
		for _, t := range cat.Tables() {
			mirrored = append(mirrored, t.Name)
		}
		e.batches.stmts = newLogStatements(mirrored)
		e.sources = append(e.sources, snapshotSource{snap: e.snap, catalog: cat})
	}
	var batched Querier = e.batches
	if o.DirectReads {
		batched = pool
	}
	e.sources = append(e.sources, liveSource{batched: batched, direct: pool, nonCatalog: &e.nonCatalog})
	return e
}

// BatchStats says how many batches carried how many reads and log rows.
func (e *Engine) BatchStats() (batches, reads, rows int64) {
	return e.batches.batches.Load(), e.batches.reads.Load(), e.batches.rows.Load()
}

// Close flushes the decision log.
func (e *Engine) Close() { e.batches.close() }

// Decide answers one request. Errors are only for callers that may not ask
// (ErrActorNotOwned), cancelled contexts, and ErrUnavailable for a replay the
// guard could not decide; every other failure of the guard itself is a DENY
// ("guard failure (failing closed)").
func (e *Engine) Decide(ctx context.Context, req *Request) (*guardv1.DecideResponse, error) {
	p := e.plan(req)
	for _, src := range e.sources {
		r, err := src.read(ctx, p)
		if errors.Is(err, errNotServed) {
			continue
		}
		v := e.dryRunHold(ctx, p, r, judge(p, r, err))
		if r != nil && r.fence != nil && v.step != stepLog {
			// A copy's reading is only ever logged: a hold is created in a
			// transaction of its own, so its facts are read live, at once.
			p.direct = true
			continue
		}
		resp, err := e.record(ctx, p, r, v)
		if r != nil && r.fence != nil {
			if errors.Is(err, errStale) {
				// The database moved past the copy (or the request id was
				// decided before): decide live; the copy catches up.
				e.snap.Behind(*r.fence)
				e.snapshotOutcome("stale")
				continue
			}
			e.snapshotOutcome("snapshot")
		}
		return resp, err
	}
	return nil, errors.New("guard: no fact source served the decision") // the live source serves every plan
}

func (e *Engine) snapshotOutcome(outcome string) {
	if e.observeSnapshot != nil {
		e.observeSnapshot(outcome)
	}
}

// ReadFacts reads in's catalog entry's facts and the actor's session row
// as a decision does: from tables (a snapshot copy) when it is set and the
// entry is served from it (ok false otherwise), else from the database in
// one statement through q. Tests compare the two readings.
func (e *Engine) ReadFacts(ctx context.Context, q Querier, tables *FactTables, in Input) (runner, group *string, f Facts, ok bool, err error) {
	in.Grant = ""
	p := e.plan(&Request{Input: in})
	if p.entry == nil {
		return nil, nil, Facts{}, false, fmt.Errorf("%s is not in the catalog", in.Action)
	}
	var r *reading
	if tables != nil {
		args, served := p.snapshotArgs()
		if !served {
			return nil, nil, Facts{}, false, nil
		}
		c, f, err := e.Catalog.lookupFacts(tables, p.entry, &in, "", args)
		return c.sessionRunner, c.sessionGroup, f, true, err
	}
	if r, err = (liveSource{batched: q, direct: q, nonCatalog: &e.nonCatalog}).read(ctx, p); err != nil {
		return nil, nil, Facts{}, true, err
	}
	return r.sessionRunner, r.sessionGroup, r.facts, true, nil
}

// Querier reads a decision's facts: a pool, a connection or a transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Baseline re-runs the structural check of in live, with no side effects
// and nothing logged: precheck and baseline over facts read through q (the
// caller's transaction, so what it then changes is judged on the same
// snapshot) for an agent of runnerID's (whose freeze it reads, as a
// decision does). ApplyAction uses it so a stored answer, or an ALLOW
// decided before a revocation or a freeze, is not applied past it (D3 at
// apply). A read failure is an error; a failing baseline is a deny.
func (e *Engine) Baseline(ctx context.Context, q Querier, in Input, runnerID string) (Decision, error) {
	in.Grant = ""
	p := e.plan(&Request{Input: in, RunnerID: runnerID})
	if p.badArgs {
		return failClosed(), nil
	}
	r, err := liveSource{batched: q, direct: q, nonCatalog: &e.nonCatalog}.read(ctx, p)
	if err != nil {
		return Decision{}, err
	}
	return evaluate(p.Entry(), &in, r.facts), nil
}

// isRead: the verb of an admin action ("groups.list", "sessions.history").
func isRead(action string) bool {
	i := strings.LastIndexByte(action, '.')
	switch action[i+1:] {
	case "list", "get", "history", "explain":
		return true
	}
	return false
}
