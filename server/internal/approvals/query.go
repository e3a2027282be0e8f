package approvals

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/fault"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/paging"
	"github.com/clawguard/clawguard/server/internal/sessions"
	"github.com/clawguard/clawguard/server/internal/store"
)

// Viewer is who is looking at holds. Operators and bridges see every hold;
// a user sees the holds they may resolve; a runner sees the holds of the
// sessions it hosts, and an agent it speaks for (AgentGroup) only those of
// its own group among them.
type Viewer struct {
	All        bool
	UserID     string
	RunnerID   string
	AgentGroup string
}

// ListFilter narrows List.
type ListFilter struct {
	Status      string // holds.status value; "" = any
	Kind        string
	GroupID     string
	EligibleFor string    // only holds this user may resolve
	Resolved    bool      // only holds no longer pending (Status "" only)
	Resolver    string    // only holds this user resolved
	Since       time.Time // only holds asked for at or after it (zero: any)
	Limit       int32     // page size (paging.Limit)
	PageToken   string    // the previous page's next token
}

// List returns a page of visible holds matching f, newest first, and the
// token of the next page ("" when none).
func (s *Service) List(ctx context.Context, v Viewer, f ListFilter) (_ []*guardv1.Hold, _ string, err error) {
	defer store.Faulted(&err, "holds")
	limit, err := paging.Limit(f.Limit)
	if err != nil {
		return nil, "", err
	}
	q, err := listConditions(v, &f)
	if err != nil {
		return nil, "", err
	}
	filter := paging.Filter(v, f.Status, f.Kind, f.GroupID, f.EligibleFor, f.Resolved, f.Resolver, f.Since)
	cur, err := paging.Decode(f.PageToken, filter)
	if err != nil {
		return nil, "", err
	}
	if cur != nil {
		// Keyset: after the last row of the previous page (created_at DESC, id).
		t, id := q.arg(cur.At), q.arg(cur.ID)
		q.and("(created_at < " + t + " OR (created_at = " + t + " AND id > " + id + "))")
	}
	out, more, err := s.listPage(ctx, q, f.EligibleFor, limit)
	if err != nil {
		return nil, "", err
	}
	if err := judgeApprovals(ctx, s.pool, out...); err != nil {
		return nil, "", err
	}
	next := ""
	if more {
		last := out[len(out)-1]
		next = paging.Next(last.GetCreatedAt().AsTime(), last.GetId(), filter)
	}
	return out, next, nil
}

// listQuery is a WHERE clause and its parameters.
type listQuery struct {
	where []string
	args  []any
}

// arg is the parameter of x.
func (q *listQuery) arg(x any) string {
	q.args = append(q.args, x)
	return fmt.Sprintf("$%d", len(q.args))
}

func (q *listQuery) and(cond string) { q.where = append(q.where, cond) }

// listConditions are f's conditions and what v may see: a runner its
// sessions' holds (an agent's, its group's only), a user the holds they
// may resolve (f.EligibleFor set to them, judged by MayResolve on the rows).
func listConditions(v Viewer, f *ListFilter) (*listQuery, error) {
	q := &listQuery{where: []string{"true"}}
	if f.Status != "" {
		q.and("status = " + q.arg(f.Status))
	}
	if f.Kind != "" {
		q.and("kind = " + q.arg(f.Kind))
	}
	if f.GroupID != "" {
		q.and("agent_group_id = " + q.arg(f.GroupID))
	}
	if f.Resolved && f.Status == "" {
		q.and("status <> 'pending'")
	}
	if f.Resolver != "" {
		q.and("resolver = " + q.arg(f.Resolver))
	}
	if !f.Since.IsZero() {
		q.and("created_at >= " + q.arg(f.Since))
	}
	switch {
	case v.All:
	case v.RunnerID != "":
		q.and("session_id IN (SELECT id FROM sessions WHERE runner_id = " + q.arg(v.RunnerID) + ")")
		if v.AgentGroup != "" {
			q.and("agent_group_id = " + q.arg(v.AgentGroup))
		}
	case v.UserID != "":
		if f.EligibleFor != "" && f.EligibleFor != v.UserID {
			return nil, fault.New(fault.Denied, "a user lists holds as themselves")
		}
		f.EligibleFor = v.UserID
	default:
		return nil, fault.New(fault.Denied, "no hold is visible to this caller")
	}
	return q, nil
}

// listPage reads up to limit holds q selects, newest first, those that
// eligibleFor ("" = anyone) may resolve; more when a further one exists.
func (s *Service) listPage(ctx context.Context, q *listQuery, eligibleFor string, limit int) (_ []*guardv1.Hold, more bool, err error) {
	var roles Roles
	if eligibleFor != "" {
		if roles, err = LoadRoles(ctx, s.pool, eligibleFor); err != nil {
			return nil, false, err
		}
	}
	// Eligibility is MayResolve itself (not a SQL copy of it), so rows are
	// filtered here; the scan stops at the first match past a full page.
	rows, err := s.pool.Query(ctx, `SELECT `+holdColumns+` FROM holds WHERE `+strings.Join(q.where, " AND ")+` ORDER BY created_at DESC, id`, q.args...)
	if err != nil {
		return nil, false, fmt.Errorf("list holds: %w", err)
	}
	defer rows.Close()
	out := []*guardv1.Hold{}
	for rows.Next() {
		h, err := holdFromRow(rows)
		if err != nil {
			return nil, false, fmt.Errorf("list holds: %w", err)
		}
		if eligibleFor != "" && !MayResolveWithRoles(h.ApproverRule, h.ApproverScope, eligibleFor, roles) {
			continue
		}
		if len(out) == limit {
			more = true
			break
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("list holds: %w", err)
	}
	return out, more, nil
}

// Get returns one hold the viewer may see; any other reads as NotFound (no
// existence oracle).
func (s *Service) Get(ctx context.Context, v Viewer, id string) (_ *guardv1.Hold, err error) {
	defer store.Faulted(&err, "hold")
	h, err := GetHold(ctx, s.pool, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fault.New(fault.NotFound, "hold %s not found", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get hold: %w", err)
	}
	ok, err := s.Visible(ctx, v, h)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fault.New(fault.NotFound, "hold %s not found", id)
	}
	if err := judgeApprovals(ctx, s.pool, h); err != nil {
		return nil, err
	}
	return h, nil
}

// maxHistoryDecisions bounds the decisions a hold's history names.
const maxHistoryDecisions = 50

// View is Get as Approvals.Get answers it: the hold, whether the viewing
// user may resolve it now and, with history, its events and the decisions
// that made and used it.
func (s *Service) View(ctx context.Context, v Viewer, id string, history bool) (_ *guardv1.GetResponse, err error) {
	defer store.Faulted(&err, "hold")
	h, err := s.Get(ctx, v, id)
	if err != nil {
		return nil, err
	}
	out := &guardv1.GetResponse{Hold: h}
	if v.UserID != "" {
		if out.MayResolve, err = MayResolve(ctx, s.pool, h.GetApproverRule(), h.GetApproverScope(), v.UserID); err != nil {
			return nil, err
		}
	}
	if !history {
		return out, nil
	}
	if out.Events, err = eventsOf(ctx, s.pool, id); err != nil {
		return nil, err
	}
	if out.DecisionIds, err = guard.DecisionsOfHold(ctx, s.pool, id, maxHistoryDecisions); err != nil {
		return nil, err
	}
	return out, nil
}

// Visible says whether v may see h.
func (s *Service) Visible(ctx context.Context, v Viewer, h *guardv1.Hold) (bool, error) {
	switch {
	case v.All:
		return true, nil
	case v.RunnerID != "":
		if h.SessionId == "" || (v.AgentGroup != "" && h.GetAgentGroupId() != v.AgentGroup) {
			return false, nil
		}
		runner, found, err := sessions.RunnerOf(ctx, s.pool, h.SessionId)
		if err != nil {
			return false, fmt.Errorf("hold visibility: %w", err)
		}
		return found && runner == v.RunnerID, nil
	case v.UserID != "":
		return MayResolve(ctx, s.pool, h.ApproverRule, h.ApproverScope, v.UserID)
	}
	return false, nil
}

// Request creates a hold outside any decision (Approvals.Request): no
// eligible approver is FailedPrecondition with the reason.
func (s *Service) Request(ctx context.Context, req CreateRequest) (_ CreateResult, err error) {
	defer store.Faulted(&err, "hold request")
	var res CreateResult
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		res, err = s.CreateHoldTx(ctx, tx, req)
		return err
	})
	if err != nil {
		return res, err
	}
	if res.NoApprover {
		return res, fault.New(fault.Precondition, "no hold created: %s", res.Reason)
	}
	if res.Created {
		s.log.Info("hold requested", "audit", true, "hold", res.Hold.Id, "title", res.Hold.Title, "kind", res.Hold.Kind, "group", res.Hold.AgentGroupId,
			"requester", guard.ActorInWords(req.Requester), "approver_rule", res.Hold.GetApproverRule().String(), "undelivered", res.Undelivered)
	}
	return res, nil
}

// WatchFilter selects the events a viewer may see, narrowed by kind and
// group. A user's roles are re-read at most once a second per subscriber,
// so a busy stream costs no query per event.
func (s *Service) WatchFilter(v Viewer, kind, groupID string) EventFilter {
	var (
		roles  Roles
		loaded time.Time
	)
	return func(ctx context.Context, ev *guardv1.WatchResponse) (bool, error) {
		h := ev.GetHold()
		if (kind != "" && h.GetKind() != kind) || (groupID != "" && h.GetAgentGroupId() != groupID) {
			return false, nil
		}
		if v.UserID == "" || v.All {
			return s.Visible(ctx, v, h)
		}
		if time.Since(loaded) > time.Second {
			var err error
			if roles, err = LoadRoles(ctx, s.pool, v.UserID); err != nil {
				return false, err
			}
			loaded = time.Now()
		}
		return MayResolveWithRoles(h.GetApproverRule(), h.GetApproverScope(), v.UserID, roles), nil
	}
}
