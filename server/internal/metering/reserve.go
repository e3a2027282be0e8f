package metering

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/modelrule"
	"github.com/clawguard/clawguard/server/internal/fault"
	"github.com/clawguard/clawguard/server/internal/store"
)

// Reserve reserves a call's worst case against its group's budget, citing
// the call's model.call ALLOW (and, past the budget, a model.budget ALLOW).
// It is on the call's way to the provider, so it costs two round trips:
// the reads in one batch, then one statement that reserves on the counter
// and records the reservation, committed without waiting for the WAL
// flush (a crash loses at most reservations, which their settles record
// again). The period's first reservation makes its counter first.
func (s *Service) Reserve(ctx context.Context, runnerID string, req *guardv1.ReserveModelUsageRequest) (_ *guardv1.ReserveModelUsageResponse, err error) {
	defer store.Faulted(&err, "model reservation")
	if err := checkReserve(req); err != nil {
		return nil, err
	}
	in, err := s.readReserve(ctx, runnerID, req)
	if err != nil {
		return nil, err
	}
	w := modelrule.Tokens{Input: req.GetWorst().GetInput(), Output: req.GetWorst().GetOutput(),
		CacheRead: req.GetWorst().GetCacheRead(), CacheWrite: req.GetWorst().GetCacheWrite()}
	r := reservation{id: req.GetDecisionId(), group: in.group, session: req.GetSessionId(), runner: runnerID,
		provider: req.GetProvider(), model: req.GetModel(), day: dayOf(in.now), worst: w,
		tokens: w.Total(), cost: in.price.WorstCost(satAdd(w.Input, satAdd(w.CacheRead, w.CacheWrite)), w.Output),
		budgetDecision: req.GetOverBudgetDecisionId()}
	outcome := "reserved"
	if in.past {
		outcome = "past_budget"
	}
	if in.hasBudget {
		start := modelrule.PeriodStart(in.budget.Period, in.now)
		r.countedPeriod, r.countedStart = in.budget.Period, &start
	}
	ok, err := s.writeReservation(ctx, r, in)
	if err != nil {
		return nil, err
	}
	if !ok {
		out, err := overBudget(ctx, s.pool, in.group, in.budget, *r.countedStart)
		if err == nil {
			s.opts.Metrics.Reserved("over_budget")
		}
		return out, err
	}
	s.opts.Metrics.Reserved(outcome)
	return &guardv1.ReserveModelUsageResponse{ReservationId: r.id}, nil
}

// reserveInput is what a reservation reads before it writes.
type reserveInput struct {
	group     string
	now       time.Time
	budget    budget
	hasBudget bool
	past      bool // past the budget, with a model.budget ALLOW
	price     modelrule.Price
}

// readReserve reads, in one batch, the session (placed on the runner), the
// cited decisions, the group's budget and the model's price, and checks
// them.
func (s *Service) readReserve(ctx context.Context, runnerID string, req *guardv1.ReserveModelUsageRequest) (reserveInput, error) {
	var in reserveInput
	b := &pgx.Batch{}
	b.Queue(`SELECT agent_group_id, COALESCE(runner_id, ''), now() FROM sessions WHERE id = $1`, req.GetSessionId())
	b.Queue(citeSQL, citeArgs(req.GetDecisionId(), s.opts.CitationWindow)...)
	b.Queue(budgetSQL+` WHERE b.agent_group_id = (SELECT agent_group_id FROM sessions WHERE id = $1)`, req.GetSessionId())
	b.Queue(priceSQL, req.GetProvider(), req.GetModel())
	in.past = req.GetOverBudgetDecisionId() != ""
	if in.past {
		b.Queue(citeSQL, citeArgs(req.GetOverBudgetDecisionId(), s.opts.CitationWindow)...)
	}
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	var owner string
	err := br.QueryRow().Scan(&in.group, &owner, &in.now)
	if store.IsNoRows(err) || (err == nil && owner != runnerID) {
		return in, notHosted(runnerID, req.GetSessionId())
	}
	if err != nil {
		return in, fmt.Errorf("read session %s: %w", req.GetSessionId(), err)
	}
	c, err := checkCitation(br.QueryRow(), req.GetDecisionId(), req.GetSessionId(), modelrule.CallAction, s.opts.CitationWindow)
	if err != nil {
		return in, err
	}
	if c.resource[modelrule.KeyProvider] != req.GetProvider() || c.resource[modelrule.KeyModel] != req.GetModel() {
		return in, fault.New(fault.Denied, "citation refused: decision %q decided %s/%s, not %s/%s", req.GetDecisionId(),
			c.resource[modelrule.KeyProvider], c.resource[modelrule.KeyModel], req.GetProvider(), req.GetModel())
	}
	if in.budget, in.hasBudget, err = scanBudget(br.QueryRow()); err != nil {
		return in, err
	}
	if in.price, err = scanPrice(br.QueryRow(), req.GetProvider()); err != nil {
		return in, err
	}
	if in.past {
		bc, err := checkCitation(br.QueryRow(), req.GetOverBudgetDecisionId(), req.GetSessionId(), modelrule.BudgetAction, s.opts.CitationWindow)
		if err != nil {
			return in, err
		}
		if in.hasBudget && bc.resource[modelrule.KeyBudget] != in.budget.Period {
			return in, fault.New(fault.Precondition, "citation refused: decision %q allowed going past the %s budget; the group's budget is per %s",
				req.GetOverBudgetDecisionId(), bc.resource[modelrule.KeyBudget], in.budget.Period)
		}
	}
	return in, nil
}

// insertSQL records a reservation ($1..$14, reservation.args).
const insertSQL = `INSERT INTO model_reservations (id, agent_group_id, session_id, runner_id, provider, model, day,
		worst_input, worst_output, tokens, cost, counted_period, counted_start, budget_decision_id)
	SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, NULLIF($14, '')`

// reserveSQL reserves on the counter when the call fits the budget ($16
// tokens, $17 cost; $15: past it with an approval) and records the
// reservation, in one statement; it answers whether it reserved and
// whether the counter exists.
const reserveSQL = `WITH upd AS (
		UPDATE model_spend SET reserved_tokens = reserved_tokens + $10::bigint, reserved_cost = reserved_cost + $11::bigint
		WHERE agent_group_id = $2 AND period = $12 AND period_start = $13
		  AND ($15::bool OR (($16::bigint = 0 OR spent_tokens + reserved_tokens + $10 <= $16::bigint)
		   AND ($17::bigint = 0 OR spent_cost + reserved_cost + $11 <= $17::bigint)))
		RETURNING 1),
	ins AS (` + insertSQL + ` WHERE EXISTS (SELECT 1 FROM upd) RETURNING id)
	SELECT EXISTS (SELECT 1 FROM ins), EXISTS (SELECT 1 FROM model_spend WHERE agent_group_id = $2 AND period = $12 AND period_start = $13)`

// args are a reservation's insertSQL parameters.
func (r reservation) args() []any {
	return []any{r.id, r.group, r.session, r.runner, r.provider, r.model, r.day,
		satAdd(r.worst.Input, satAdd(r.worst.CacheRead, r.worst.CacheWrite)), r.worst.Output, r.tokens, r.cost,
		r.countedPeriod, r.countedStart, r.budgetDecision}
}

// writeReservation records the reservation, on the budget's counter when
// the group has one (false: over budget, nothing written). A counter the
// period does not have yet is made first, once.
func (s *Service) writeReservation(ctx context.Context, r reservation, in reserveInput) (bool, error) {
	if !in.hasBudget {
		_, err := store.AsyncWrite(ctx, s.pool, insertSQL, r.args(), nil)
		return true, reservationConflict(err, r)
	}
	args := append(r.args(), in.past, in.budget.Tokens, in.budget.Cost)
	for attempt := 0; ; attempt++ {
		var reserved, counter bool
		_, err := store.AsyncWrite(ctx, s.pool, reserveSQL, args, []any{&reserved, &counter})
		if err != nil || reserved || counter || attempt > 0 {
			return reserved, reservationConflict(err, r)
		}
		if err := pgx.BeginTxFunc(ctx, s.pool, reserveTx, func(tx pgx.Tx) error {
			_, err := makeCounter(ctx, tx, r.group, r.countedPeriod, *r.countedStart)
			return err
		}); err != nil {
			return false, err
		}
	}
}

func checkReserve(r *guardv1.ReserveModelUsageRequest) error {
	switch {
	case r.GetSessionId() == "":
		return fault.InvalidField("session_id", "required")
	case r.GetDecisionId() == "":
		return fault.InvalidField("decision_id", "required (a reservation cites the model.call ALLOW it is for)")
	case r.GetWorst() == nil:
		return fault.InvalidField("worst", "required: the call's output bound and its input's upper bound")
	}
	if err := checkTokens("worst", r.GetWorst()); err != nil {
		return err
	}
	if err := modelrule.CheckProvider(r.GetProvider()); err != nil {
		return fault.InvalidField("provider", "%v", err)
	}
	if err := modelrule.CheckModel(r.GetModel()); err != nil {
		return fault.InvalidField("model", "%v", err)
	}
	return nil
}

// maxTokens bounds each count a runner reports (a trillion: no call comes
// near it), so no sum of them overflows a counter.
const maxTokens = 1 << 40

func checkTokens(field string, t *guardv1.ModelTokens) error {
	for _, v := range []int64{t.GetInput(), t.GetOutput(), t.GetCacheRead(), t.GetCacheWrite()} {
		if v < 0 || v > maxTokens {
			return fault.InvalidField(field, "a token count of %d is out of range (0..%d)", v, int64(maxTokens))
		}
	}
	return nil
}

// hostedSession reads the session's group and the database's clock; a
// session not placed on the runner reads as one that does not exist.
func hostedSession(ctx context.Context, tx pgx.Tx, runnerID, sessionID string) (group string, now time.Time, err error) {
	var owner string
	err = tx.QueryRow(ctx, `SELECT agent_group_id, COALESCE(runner_id, ''), now() FROM sessions WHERE id = $1`, sessionID).Scan(&group, &owner, &now)
	if store.IsNoRows(err) || (err == nil && owner != runnerID) {
		return "", now, notHosted(runnerID, sessionID)
	}
	if err != nil {
		return "", now, fmt.Errorf("read session %s: %w", sessionID, err)
	}
	return group, now, nil
}

// citation is a cited decision's decided resource.
type citation struct{ resource map[string]string }

// citeSQL reads a cited decision and its decided resource ($1: the
// citation window, then the decision's key, store.DecisionKey).
var citeSQL = `SELECT effect, action, COALESCE(session_id, ''), dry_run, at <= now() - $1::interval, COALESCE(trace->'r', '{}'::jsonb)
	FROM decisions WHERE ` + store.DecisionKeySQL(2)

// citeArgs are citeSQL's arguments for decisionID.
func citeArgs(decisionID string, window time.Duration) []any {
	return append([]any{window}, store.DecisionKeyArgs(decisionID)...)
}

// cite checks a decision a reservation cites (checkCitation).
func cite(ctx context.Context, tx pgx.Tx, decisionID, sessionID, action string, window time.Duration) (citation, error) {
	return checkCitation(tx.QueryRow(ctx, citeSQL, citeArgs(decisionID, window)...), decisionID, sessionID, action, window)
}

// checkCitation checks a decision a reservation cites (its citeSQL row):
// an ALLOW of action for the session, not a dry run, within the citation
// window. That it is used once is the reservation's key (or its unique
// budget_decision_id).
func checkCitation(row pgx.Row, decisionID, sessionID, action string, window time.Duration) (citation, error) {
	var (
		effect, dAction, dSession string
		dryRun, stale             bool
		resource                  map[string]string
	)
	err := row.Scan(&effect, &dAction, &dSession, &dryRun, &stale, &resource)
	if store.IsNoRows(err) {
		return citation{}, fault.New(fault.Precondition, "citation refused: decision %q not found", decisionID)
	}
	if err != nil {
		return citation{}, fmt.Errorf("read cited decision: %w", err)
	}
	refuse := func(why string) (citation, error) {
		return citation{}, fault.New(fault.Precondition, "citation refused: decision %q: %s", decisionID, why)
	}
	switch {
	case dSession != sessionID:
		return citation{}, fault.New(fault.Denied, "citation refused: decision %q was made for another session", decisionID)
	case effect != "allow":
		return refuse("it is a " + effect + ", not an allow")
	case dryRun:
		return refuse("it is a dry run")
	case dAction != action:
		return refuse(fmt.Sprintf("it authorized %q, not %q", dAction, action))
	case stale:
		return refuse(fmt.Sprintf("it is older than the citation window (%s)", window))
	}
	return citation{resource: resource}, nil
}

// priceSQL is the price of provider $1's model $2: an exact entry, else
// the longest prefix (modelrule.PriceFor's rule, read by key).
const priceSQL = `SELECT model, input_micros, output_micros, cache_read_micros, cache_write_micros FROM model_prices
	WHERE provider = $1 AND (model = $2 OR (right(model, 1) = '*' AND starts_with($2, left(model, -1))))
	ORDER BY model = $2 DESC, length(model) DESC LIMIT 1`

// priceFor is the price of provider's model; none costs 0.
func priceFor(ctx context.Context, q store.Querier, provider, model string) (modelrule.Price, error) {
	return scanPrice(q.QueryRow(ctx, priceSQL, provider, model), provider)
}

func scanPrice(row pgx.Row, provider string) (modelrule.Price, error) {
	p := modelrule.Price{Provider: provider}
	err := row.Scan(&p.Model, &p.Input, &p.Output, &p.CacheRead, &p.CacheWrite)
	if store.IsNoRows(err) {
		return modelrule.Price{}, nil
	}
	if err != nil {
		return p, fmt.Errorf("read the price of a %s model: %w", provider, err)
	}
	return p, nil
}

// makeCounter makes the counter of a period from the usage settled in it,
// under the group's lock taken exclusive (settles wait, so none is counted
// twice or missed). false: it existed already (the call is over budget).
func makeCounter(ctx context.Context, tx pgx.Tx, group, period string, start time.Time) (bool, error) {
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM model_spend WHERE agent_group_id = $1 AND period = $2 AND period_start = $3)`,
		group, period, start).Scan(&exists); err != nil || exists {
		return false, err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, groupLock(group)); err != nil {
		return false, err
	}
	end := start.AddDate(0, 0, 1)
	if period == modelrule.PeriodMonth {
		end = start.AddDate(0, 1, 0)
	}
	_, err := tx.Exec(ctx, `INSERT INTO model_spend (agent_group_id, period, period_start, spent_tokens, spent_cost)
		SELECT $1, $2, $3, COALESCE(sum(input_tokens + output_tokens + cache_read_tokens + cache_write_tokens), 0), COALESCE(sum(cost_micros), 0)
		FROM model_usage WHERE agent_group_id = $1 AND day >= $3 AND day < $4
		ON CONFLICT DO NOTHING`, group, period, start, end)
	if err != nil {
		return false, fmt.Errorf("make the %s budget counter of %s: %w", period, group, err)
	}
	return true, nil
}

// overBudget is the answer to a call the budget refused: the budget as it
// stands and what the group used in the period, for the approver's card.
func overBudget(ctx context.Context, tx store.Querier, group string, b budget, start time.Time) (*guardv1.ReserveModelUsageResponse, error) {
	state, err := budgetState(ctx, tx, group, b, start)
	if err != nil {
		return nil, err
	}
	usage, err := PeriodUsage(ctx, tx, group, start)
	if err != nil {
		return nil, err
	}
	return &guardv1.ReserveModelUsageResponse{OverBudget: true, Budget: state, PeriodUsage: usage}, nil
}

// reservation is a model_reservations row.
type reservation struct {
	id, group, session, runner, provider, model string
	day                                         time.Time
	worst                                       modelrule.Tokens
	tokens, cost                                int64
	countedPeriod                               string
	countedStart                                *time.Time
	budgetDecision                              string
	settledAt                                   *time.Time
}

func insertReservation(ctx context.Context, tx pgx.Tx, r reservation) error {
	_, err := tx.Exec(ctx, insertSQL, r.args()...)
	return reservationConflict(err, r)
}

// reservationConflict says which citation was used twice (a reservation's
// key, or its unique budget decision).
func reservationConflict(err error, r reservation) error {
	var pg *pgconn.PgError
	if errors.As(err, &pg) && pg.Code == "23505" {
		if pg.ConstraintName == "model_reservations_pkey" {
			return fault.New(fault.Precondition, "citation refused: decision %q already has its reservation (single use)", r.id)
		}
		return fault.New(fault.Precondition, "citation refused: decision %q already let a call past the budget (single use)", r.budgetDecision)
	}
	if err != nil {
		return fmt.Errorf("record the reservation: %w", err)
	}
	return nil
}

func dayOf(t time.Time) time.Time { return modelrule.PeriodStart(modelrule.PeriodDay, t) }

func satAdd(a, b int64) int64 { return modelrule.Tokens{Input: a, Output: b}.Total() }
