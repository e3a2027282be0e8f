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
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/store"
)

// ErrActorNotOwned: a runner named an agent actor on a session it does not
// host (or of another group). Nothing is logged; the API says PermissionDenied.
var ErrActorNotOwned = errors.New("actor is not an agent on a session this runner hosts")

// ErrUnavailable: a grant-carrying decision could not be made for an
// infrastructure reason (database unreachable, the decision log refusing
// writes, a timeout). Nothing was decided and the grant is untouched, so the
// replay must be tried again, not taken as a final DENY (an approved action
// would be lost). The API answers Unavailable with a retry hint. Decisions
// without a grant still fail closed as DENY.
var ErrUnavailable = errors.New("the guard could not decide (retryable)")

// RetryAfter is the back-off the API suggests with ErrUnavailable.
const RetryAfter = time.Second

// unavailable wraps an infrastructure failure of a replay.
func unavailable(cause error) error { return fmt.Errorf("%w: %v", ErrUnavailable, cause) }

// retryable reports whether a failure of req is ErrUnavailable rather than
// a fail-closed DENY: only a replay (a grant) that would consume something.
func retryable(req *Request) bool { return req.Grant != "" && !req.DryRun }

// Request is one decision to make.
type Request struct {
	Input
	// RawPayload is Input.Payload as received (stored with a hold); nil →
	// built from Input.Payload when needed.
	RawPayload *structpb.Struct
	// Card: a HOLD answer creates its hold in the same transaction.
	Card *guardv1.HoldCard
	// DryRun evaluates with no side effects (no hold, no grant consumed).
	DryRun bool
	// RequestID with RunnerID is the idempotency key.
	RequestID string
	// RunnerID is the calling runner ("" for other principals).
	RunnerID string
	// RequireOwnedSession: the actor must be an agent on a session RunnerID hosts.
	RequireOwnedSession bool
}

// Engine is the decision function with its storage.
type Engine struct {
	Catalog *Catalog
	pool    *pgxpool.Pool
	log     *slog.Logger
	observe func(action, effect string, took time.Duration)
	// observeQuery counts dry runs and reads apart (kind "dry_run", "read").
	observeQuery func(action, effect, kind string, took time.Duration)
	holds        HoldCreator
	// observeMode counts decisions a mode relaxed; warn tells of warn-mode ones.
	observeMode func(action, mode, wouldEffect string)
	warn        func(ctx context.Context, w Warning)
	pipe        *pipeline
	reads       Querier // the pipeline, or the pool
	common      [4]string
	snap        Snapshot
	// observeSnapshot counts decisions answered from the snapshot
	// ("snapshot") and those whose revision check failed ("stale").
	observeSnapshot func(outcome string)
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
	// Pipelines is the number of concurrent batch senders (default 1).
	Pipelines int
	// Yield lets a sender yield once before sending, so decisions that
	// are runnable at that moment join the batch.
	Yield bool
	// DirectReads reads each decision's facts on its own pooled
	// connection instead of through the pipeline (for comparison).
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
	// Snapshot, when set, is the replica's copy of the tables the lookups
	// read: decisions it can settle skip the facts read (decideFromSnapshot).
	Snapshot Snapshot
	// ObserveSnapshot counts decisions answered from the snapshot
	// ("snapshot") and those sent live by a failed revision check ("stale").
	ObserveSnapshot func(outcome string)
	// ObserveBatch is told of each pipeline batch: its facts reads, its log
	// rows and its round trip (metrics).
	ObserveBatch func(reads, rows int, took time.Duration)
	// LogPool, when set, carries the pipeline's batches (the facts reads and
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
		Catalog: cat, pool: pool, log: o.Log, observe: o.Observe, common: factsQueries(nil),
		observeMode: o.ObserveMode, observeQuery: o.ObserveQuery, warn: o.Warn, holds: o.Holds,
		pipe: newPipeline(logPool, o.Log, o.Pipelines, o.Yield),
		snap: o.Snapshot, observeSnapshot: o.ObserveSnapshot,
	}
	e.pipe.observe = o.ObserveBatch
	if e.snap != nil {
		var mirrored []string
		for _, t := range cat.Tables() {
			mirrored = append(mirrored, t.Name)
		}
		e.pipe.stmts = newLogStatements(mirrored)
	}
	e.reads = e.pipe
	if o.DirectReads {
		e.reads = pool
	}
	return e
}

// PipelineStats says how many batches carried how many reads and log rows.
func (e *Engine) PipelineStats() (batches, reads, rows int64) {
	return e.pipe.batches.Load(), e.pipe.reads.Load(), e.pipe.rows.Load()
}

// Close flushes the decision log.
func (e *Engine) Close() { e.pipe.close() }

// Decide answers one request. Errors are only for callers that may not ask
// (ErrActorNotOwned), cancelled contexts, and ErrUnavailable for a replay the
// guard could not decide; every other failure of the guard itself is a DENY
// ("guard failure (failing closed)").
func (e *Engine) Decide(ctx context.Context, req *Request) (*guardv1.DecideResponse, error) {
	start := time.Now()
	resp, err, done, holding := e.decideFromSnapshot(ctx, req, start)
	if done {
		return resp, err
	}
	return e.decideLive(ctx, req, start, holding)
}

// decideFromSnapshot decides from the replica's copy of the facts when the
// copy can settle the answer alone: a catalog entry whose facts are all
// lookups, no grant to consume, no dry run, no hold to create. Its log row
// carries the copy's revision and is written only while the database is
// still at it (the pipeline's check, in the INSERT), so a change committed
// before the row is written — a revocation the copy has not applied yet —
// is never answered from the copy: done is false and the caller decides
// live, as it does whenever the copy cannot settle the answer.
//
// holding reports that the copy answered HOLD for a request with a card:
// the live decision will most likely create a hold, a transaction of its
// own, so its facts are read at once rather than behind a batch.
func (e *Engine) decideFromSnapshot(ctx context.Context, req *Request, start time.Time) (_ *guardv1.DecideResponse, _ error, done, holding bool) {
	if e.snap == nil || req.Grant != "" || req.DryRun {
		return nil, nil, false, false
	}
	ce, ok := e.Catalog.lookup(req.Action)
	if !ok || !ce.fromSnapshot {
		return nil, nil, false, false
	}
	in := &req.Input
	args, ok := stringArgs(ce.Entry, in)
	if !ok {
		return nil, nil, false, false
	}
	tables := e.snap.Tables()
	if tables == nil {
		return nil, nil, false, false
	}
	c, f, err := e.lookupFacts(tables, ce, in, args)
	rev := tables.Revision()
	if err != nil {
		return nil, nil, false, false // the live path reads (and reports) it
	}
	if req.RequireOwnedSession && !ownsSession(req, c) {
		return nil, nil, false, false // a session just placed here: confirm live
	}
	fd := evaluate(ce.Entry, in, f)
	if fd.Effect == EffectHold && req.Card != nil {
		return nil, nil, false, true // holds are created live, in the decision's transaction
	}
	resp := &guardv1.DecideResponse{DecisionId: store.NewOrderedID("dec_", time.Now())}
	row := &logRow{ID: resp.DecisionId, Action: in.Action, RunnerID: req.RunnerID, RequestID: req.RequestID,
		Trace: encodeTrace(ce.Entry, in, f), Rev: rev, CheckRev: true}
	resp, err = e.finish(ctx, req, fd, resp, row, start)
	if errors.Is(err, errStale) {
		// The database moved past the copy (or the request id was decided
		// before): decide live, and have the copy catch up.
		e.snap.Behind(rev)
		if e.observeSnapshot != nil {
			e.observeSnapshot("stale")
		}
		return nil, nil, false, false
	}
	if err == nil && e.observeSnapshot != nil {
		e.observeSnapshot("snapshot")
	}
	return resp, err, true, false
}

// stringArgs is an entry's Args as the strings its lookups compare keys
// with (ok false when one is not a string or Args panics: decide live).
func stringArgs(e *Entry, in *Input) (out []string, ok bool) {
	if e.Args == nil {
		return nil, true
	}
	defer func() {
		if r := recover(); r != nil {
			out, ok = nil, false
		}
	}()
	raw := e.Args(in)
	out = make([]string, len(raw))
	for i, a := range raw {
		if out[i], ok = a.(string); !ok {
			return nil, false
		}
	}
	return out, true
}

// lookupFacts reads an entry's facts and the actor's session from a view.
func (e *Engine) lookupFacts(v *FactTables, ce *compiled, in *Input, args []string) (common, Facts, error) {
	group, _ := in.AgentGroup()
	r := lookupReader{v: v, group: group, session: in.Session(), args: args}
	var c common
	var err error
	if c.sessionRunner, err = r.read(&e.Catalog.session[0]); err != nil {
		return common{}, Facts{}, err
	}
	if c.sessionGroup, err = r.read(&e.Catalog.session[1]); err != nil {
		return common{}, Facts{}, err
	}
	f := Facts{vals: make(map[string]*string, len(ce.lookups))}
	for i := range ce.lookups {
		val, err := r.read(&ce.lookups[i])
		if err != nil {
			return common{}, Facts{}, err
		}
		f.vals[ce.Facts[i].Name] = val
	}
	return c, f, nil
}

// ReadFacts reads in's catalog entry's facts and the actor's session row
// as a decision does: from tables (a snapshot copy) when it is set and the
// entry is served from it (ok false otherwise), else from the database in
// one statement through q. Tests compare the two readings.
func (e *Engine) ReadFacts(ctx context.Context, q Querier, tables *FactTables, in Input) (runner, group *string, f Facts, ok bool, err error) {
	ce, found := e.Catalog.lookup(in.Action)
	if !found {
		return nil, nil, Facts{}, false, fmt.Errorf("%s is not in the catalog", in.Action)
	}
	var c common
	if tables != nil {
		args, argsOK := stringArgs(ce.Entry, &in)
		if !ce.fromSnapshot || !argsOK {
			return nil, nil, Facts{}, false, nil
		}
		c, f, err = e.lookupFacts(tables, ce, &in, args)
		return c.sessionRunner, c.sessionGroup, f, true, err
	}
	actor, _ := in.AgentGroup()
	args := []any{actor, in.Session(), "", "", ""}
	if ce.Args != nil {
		args = append(args, ce.Args(&in)...)
	}
	c, f, err = readFacts(ctx, q, ce.queries[0], ce.Facts, args)
	return c.sessionRunner, c.sessionGroup, f, true, err
}

// decideLive reads the decision's facts from the database (one round trip),
// through the pipeline unless direct: a replay (its grant is consumed in a
// transaction of its own) and a likely hold are read at once.
func (e *Engine) decideLive(ctx context.Context, req *Request, start time.Time, direct bool) (*guardv1.DecideResponse, error) {
	in := &req.Input
	ce, inCatalog := e.Catalog.lookup(in.Action)
	v := variant(in.Grant, req.RequestID)
	query, facts := e.common[v], []Fact(nil)
	var entry *Entry
	if inCatalog {
		query, facts, entry = ce.queries[v], ce.Facts, ce.Entry
	}
	group, _ := in.AgentGroup()
	args := []any{group, in.Session(), in.Grant, req.RunnerID, req.RequestID}
	var fd Decision
	c, f, err := func() (c common, f Facts, err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("args panicked: %v", r)
			}
		}()
		if entry != nil && entry.Args != nil {
			args = append(args, entry.Args(in)...)
		}
		reads := e.reads
		if direct || in.Grant != "" {
			// A replay is an approval's last step, and it and a hold are
			// each a transaction of their own: read at once, not behind a
			// batch of other decisions' log rows.
			reads = e.pool
		}
		return readFacts(ctx, reads, query, facts, args)
	}()
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil && retryable(req):
		e.log.Warn("guard facts unreadable; the replay is retryable", "action", in.Action, "grant", in.Grant, "err", err)
		return nil, unavailable(err)
	case err != nil:
		e.log.Error("guard facts unreadable; failing closed", "action", in.Action, "err", err)
		fd = failClosed()
	case c.prior != nil:
		var prior guardv1.DecideResponse
		if err := proto.Unmarshal(c.prior, &prior); err == nil {
			return &prior, nil
		}
		fd = failClosed()
	default:
		if req.RequireOwnedSession && !ownsSession(req, c) {
			return nil, ErrActorNotOwned
		}
		fd = evaluate(entry, in, f)
	}

	resp := &guardv1.DecideResponse{DecisionId: store.NewOrderedID("dec_", time.Now())}
	row := &logRow{ID: resp.DecisionId, Action: in.Action, RunnerID: req.RunnerID, RequestID: req.RequestID, DryRun: req.DryRun}
	if err == nil {
		row.Trace = encodeTrace(entry, in, f)
	}

	switch {
	case err == nil && retryable(req) && req.RunnerID != "" && fd.Effect != EffectDeny && consumedReplay(entry, in, c.grant):
		// The replay is idempotent per hold, not per runner: the session's
		// runner (a takeover one too) gets the consuming decision's answer and
		// citation while the baseline still holds; ApplyAction applies it once.
		// Only runners: their mutations go through that citation, while an
		// in-process caller (command replay, sender admission) acts on the
		// ALLOW itself, so for it a used grant stays a DENY.
		e.log.Info("replay of a consumed grant: the consuming decision's answer", "action", in.Action, "grant", in.Grant, "decision", c.grant.ConsumedBy)
		return &guardv1.DecideResponse{DecisionId: c.grant.ConsumedBy, Decision: &guardv1.Decision{
			Effect: guardv1.Effect_EFFECT_ALLOW, Reason: grantReason(in.Grant), DecidedBy: ByGrant}}, nil
	case err == nil && in.Grant != "" && fd.Effect == EffectHold:
		fd = checkGrant(entry, in, c.grant)
		if fd.Effect == EffectAllow && !req.DryRun {
			return e.consumeGrant(ctx, req, entry, fd, resp, row, start)
		}
	case err == nil && fd.Effect == EffectHold && req.Card != nil && !req.DryRun:
		return e.holdWithCard(ctx, req, entry, fd, resp, row, start)
	}
	if req.DryRun {
		resp.Explanation = Explain(entry, in, f, fd)
	}
	return e.finish(ctx, req, fd, resp, row, start)
}

// Querier reads a decision's facts: a pool, a connection or a transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Baseline re-runs the structural check of in live, with no side effects
// and nothing logged: precheck and baseline over facts read through q (the
// caller's transaction, so what it then changes is judged on the same
// snapshot). ApplyAction uses it so a stored answer, or an ALLOW decided
// before a revocation, is not applied past it (D3 at apply). A read failure
// is an error; a failing baseline is a deny.
func (e *Engine) Baseline(ctx context.Context, q Querier, in Input) (Decision, error) {
	ce, ok := e.Catalog.lookup(in.Action)
	if !ok {
		return evaluate(nil, &in, Facts{}), nil
	}
	group, _ := in.AgentGroup()
	args := []any{group, in.Session(), "", "", ""}
	if ce.Args != nil {
		extra, err := func() (a []any, err error) {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("args panicked: %v", r)
				}
			}()
			return ce.Args(&in), nil
		}()
		if err != nil {
			return failClosed(), nil
		}
		args = append(args, extra...)
	}
	_, f, err := readFacts(ctx, q, ce.queries[0], ce.Facts, args)
	if err != nil {
		return Decision{}, err
	}
	return evaluate(ce.Entry, &in, f), nil
}

func ownsSession(req *Request, c common) bool {
	a := req.Actor.GetAgent()
	return a != nil && a.GetSessionId() != "" && c.sessionRunner != nil && *c.sessionRunner == req.RunnerID &&
		c.sessionGroup != nil && *c.sessionGroup == a.GetAgentGroupId()
}

// consumeGrant allows a replay: one conditional UPDATE consumes the hold
// (of N concurrent replays, on any replica, exactly one matches it), in the
// same statement as the decision's log row (consumeSQL: one round trip,
// where a transaction of its own took four). consumed_by: only this
// decision's citation applies the held payload.
func (e *Engine) consumeGrant(ctx context.Context, req *Request, entry *Entry, d Decision,
	resp *guardv1.DecideResponse, row *logRow, start time.Time) (*guardv1.DecideResponse, error) {
	e.fill(req, d, resp, row, start)
	won, err := consumeAndLog(ctx, e.pool, row, req.Grant, entry.ApprovalAction)
	if err == nil && !won {
		// Not consumed (used, revoked, or another replay won): nothing was
		// written, and the DENY is logged on its own.
		d = Decision{Effect: EffectDeny, Reason: ReasonInvalidGrant, DecidedBy: ByGrant}
		e.fill(req, d, resp, row, start)
		err = insertTx(ctx, e.pool, row)
	}
	return e.afterTx(ctx, req, d, resp, row, err)
}

func (e *Engine) count(req *Request, eff Effect, took time.Duration) {
	action := e.metricAction(req.Action)
	if kind := e.queryKind(req); kind != "" {
		if e.observeQuery != nil {
			e.observeQuery(action, string(eff), kind, took)
		}
		return
	}
	if e.observe != nil {
		e.observe(action, string(eff), took)
	}
}

// queryKind says whether a decision changes nothing, and so is counted apart
// from enforced decisions: "dry_run" (ncl explain), "read" (an admin RPC of
// open access that only lists or gets), "" otherwise.
func (e *Engine) queryKind(req *Request) string {
	if req.DryRun {
		return "dry_run"
	}
	if entry, ok := e.Catalog.lookup(req.Action); ok && entry.Resource != "" && entry.Access == guardv1.Access_ACCESS_OPEN && isRead(req.Action) {
		return "read"
	}
	return ""
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

// metricAction bounds the action label: "non_catalog" outside the catalog.
func (e *Engine) metricAction(action string) string {
	if _, ok := e.Catalog.lookup(action); !ok {
		return "non_catalog"
	}
	return action
}
