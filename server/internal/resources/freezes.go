package resources

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/authn"
	"github.com/clawguard/clawguard/server/internal/fault"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/pushes"
	"github.com/clawguard/clawguard/server/internal/store"
)

// Freezes (issue 32): the freezes table is a fact of every catalog entry
// (the freeze rule, guard/freeze.go, reads it by scope and target), so a
// freeze holds from its commit on every replica — a snapshot copy older
// than it is never answered from. This file is the table's one writer.

// freezeKey is the freezes row of a request: its scope word and target.
func freezeKey(scope guardv1.FreezeScope, group, runner string) (word, target string, err error) {
	switch scope {
	case guardv1.FreezeScope_FREEZE_SCOPE_ALL:
		if group != "" || runner != "" {
			return "", "", invalid("scope", "all names no group and no runner")
		}
		return "all", "", nil
	case guardv1.FreezeScope_FREEZE_SCOPE_GROUP:
		if runner != "" || group == "" {
			return "", "", invalid("group", "scope group needs the group, and no runner")
		}
		return "group", group, nil
	case guardv1.FreezeScope_FREEZE_SCOPE_RUNNER:
		if group != "" || runner == "" {
			return "", "", invalid("runner", "scope runner needs the runner, and no group")
		}
		return "runner", runner, nil
	}
	return "", "", invalid("scope", "want all, group or runner")
}

func checkFreeze(r *guardv1.FreezeRequest) error {
	_, _, err := freezeKey(r.GetScope(), r.GetGroup(), r.GetRunner())
	return err
}

func checkUnfreeze(r *guardv1.UnfreezeRequest) error {
	_, _, err := freezeKey(r.GetScope(), r.GetGroup(), r.GetRunner())
	return err
}

// mayFreeze: every agent and a runner's agents are the fleet's (the
// operator, owners, global admins); a group is also its admins'.
func (v viewer) mayFreeze(scope, target string) error {
	if v.all || (scope == "group" && v.sees(target)) {
		return nil
	}
	if scope == "group" {
		return fault.Deniedf("freezing group %s needs an admin of it, an owner or a global admin", target)
	}
	return fault.Deniedf("freezing %s needs the operator, an owner or a global admin", map[string]string{"all": "every agent", "runner": "a runner"}[scope])
}

// authority is what a freeze's maker could freeze: "fleet" — the
// operator, an owner or a global admin, who freeze any scope — or "group",
// a group's admin (or an agent, through its approved admin command).
func (v viewer) authority(ctx context.Context) string {
	if c, _ := authn.FromContext(ctx); v.all && c.Agent == nil {
		return "fleet"
	}
	return "group"
}

// mayLift: lifting a freeze needs the authority that made it — a group's
// admin lifts a group admin's freeze of it, only the fleet's authority one
// the fleet's authority made (issue 41: a group admin lifted an owner's).
func (v viewer) mayLift(ctx context.Context, made, what, by string) error {
	if made == "fleet" && v.authority(ctx) != "fleet" {
		return fault.Deniedf("%s was frozen by %s: lifting it needs the operator, an owner or a global admin, as making it did", what, by)
	}
	return nil
}

// freezeScope is a freeze request's row key, once the caller may freeze it,
// and the caller's view.
func (s *Service) freezeScope(ctx context.Context, scope guardv1.FreezeScope, group, runner string) (word, target string, v viewer, err error) {
	if word, target, err = freezeKey(scope, group, runner); err != nil {
		return "", "", v, err
	}
	if v, err = s.viewer(ctx); err != nil {
		return "", "", v, err
	}
	return word, target, v, v.mayFreeze(word, target)
}

// Freeze freezes a scope. Freezing a frozen scope keeps the first freeze.
func (s *Service) Freeze(ctx context.Context, req *guardv1.FreezeRequest) (_ *guardv1.FreezeResponse, err error) {
	defer store.Faulted(&err, "freeze")
	scope, target, v, err := s.freezeScope(ctx, req.GetScope(), req.GetGroup(), req.GetRunner())
	if err != nil {
		return nil, err
	}
	switch scope {
	case "group", "runner":
		table := map[string]string{"group": "agent_groups", "runner": "runners"}[scope]
		var known bool
		if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+table+` WHERE id = $1)`, target).Scan(&known); err != nil {
			return nil, err
		}
		if !known {
			return nil, notFound("%s %q not found", scope, target)
		}
	}
	by := freezer(ctx)
	var (
		f       *guardv1.Freeze
		stopped int
	)
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		row := tx.QueryRow(ctx, `WITH put AS (
				INSERT INTO freezes (scope, target, reason, frozen_by, authority) VALUES ($1, $2, $3, $4, $5)
				ON CONFLICT (scope, target) DO NOTHING RETURNING scope, target, reason, frozen_by, frozen_at)
			SELECT scope, target, reason, frozen_by, frozen_at FROM put
			UNION ALL SELECT scope, target, reason, frozen_by, frozen_at FROM freezes WHERE scope = $1 AND target = $2
			LIMIT 1`, scope, target, req.GetReason(), by, v.authority(ctx))
		var err error
		if f, err = scanFreeze(row); err != nil {
			return err
		}
		// The agents in scope are stopped with the freeze: a stop push per
		// active session, in this transaction (a session moved meanwhile
		// takes its push along).
		ids, err := sessionsInScope(ctx, tx, scope, target, false)
		if err != nil {
			return err
		}
		for _, id := range ids {
			stop := &guardv1.Push{Body: &guardv1.Push_Stop{Stop: &guardv1.StopSession{Reason: "frozen by " + f.GetFrozenBy() + ": " + f.GetReason()}}}
			if _, err := pushes.EnqueueTx(ctx, tx, id, stop); err != nil {
				return err
			}
		}
		stopped = len(ids)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slog.InfoContext(ctx, "frozen", "audit", true, "scope", scope, "target", target, "by", f.GetFrozenBy(), "reason", f.GetReason(), "agents_stopped", stopped)
	return &guardv1.FreezeResponse{Freeze: f}, nil
}

// Unfreeze lifts a scope's freeze; NotFound when it is not frozen.
func (s *Service) Unfreeze(ctx context.Context, req *guardv1.UnfreezeRequest) (_ *guardv1.UnfreezeResponse, err error) {
	defer store.Faulted(&err, "unfreeze")
	scope, target, v, err := s.freezeScope(ctx, req.GetScope(), req.GetGroup(), req.GetRunner())
	if err != nil {
		return nil, err
	}
	var f *guardv1.Freeze
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var made, by string
		err := tx.QueryRow(ctx, `SELECT authority, frozen_by FROM freezes WHERE scope = $1 AND target = $2 FOR UPDATE`, scope, target).Scan(&made, &by)
		if err != nil {
			return err
		}
		if err := v.mayLift(ctx, made, describeScope(scope, target), by); err != nil {
			return err
		}
		f, err = scanFreeze(tx.QueryRow(ctx, `DELETE FROM freezes WHERE scope = $1 AND target = $2
			RETURNING scope, target, reason, frozen_by, frozen_at`, scope, target))
		if err != nil {
			return err
		}
		// What was, again: the agents in scope start, unless another freeze
		// still covers them.
		ids, err := sessionsInScope(ctx, tx, scope, target, true)
		if err != nil {
			return err
		}
		for _, id := range ids {
			if _, err := pushes.EnqueueTx(ctx, tx, id, &guardv1.Push{Body: &guardv1.Push_Start{Start: &guardv1.StartSession{}}}); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound("%s is not frozen", describeScope(scope, target))
	}
	if err != nil {
		return nil, err
	}
	slog.InfoContext(ctx, "unfrozen", "audit", true, "scope", scope, "target", target, "by", freezer(ctx))
	return &guardv1.UnfreezeResponse{Freeze: f}, nil
}

// ListFreezes lists the frozen scopes the caller may see, oldest first.
func (s *Service) ListFreezes(ctx context.Context, _ *guardv1.ListFreezesRequest) (_ *guardv1.ListFreezesResponse, err error) {
	defer store.Faulted(&err, "freezes")
	v, err := s.viewer(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT f.scope, f.target, f.reason, f.frozen_by, f.frozen_at, COALESCE(g.name, '')
		FROM freezes f LEFT JOIN agent_groups g ON f.scope = 'group' AND g.id = f.target
		ORDER BY f.frozen_at, f.scope, f.target`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := &guardv1.ListFreezesResponse{}
	for rows.Next() {
		var name string
		f, err := scanFreeze(rows, &name)
		if err != nil {
			return nil, err
		}
		f.GroupName = name
		// A fleet-wide freeze concerns everyone; a group's, its readers.
		if f.GetScope() == guardv1.FreezeScope_FREEZE_SCOPE_ALL || v.all || (f.GetGroup() != "" && v.sees(f.GetGroup())) {
			out.Freezes = append(out.Freezes, f)
		}
	}
	return out, rows.Err()
}

// scanFreeze reads scope, target, reason, frozen_by, frozen_at and then
// any extra columns into extra.
func scanFreeze(row pgx.Row, extra ...any) (*guardv1.Freeze, error) {
	var (
		scope, target string
		at            time.Time
		f             guardv1.Freeze
	)
	if err := row.Scan(append([]any{&scope, &target, &f.Reason, &f.FrozenBy, &at}, extra...)...); err != nil {
		return nil, err
	}
	switch scope {
	case "all":
		f.Scope = guardv1.FreezeScope_FREEZE_SCOPE_ALL
	case "group":
		f.Scope, f.Group = guardv1.FreezeScope_FREEZE_SCOPE_GROUP, target
	case "runner":
		f.Scope, f.Runner = guardv1.FreezeScope_FREEZE_SCOPE_RUNNER, target
	}
	f.FrozenAt = ts(at)
	return &f, nil
}

func describeScope(scope, target string) string {
	if scope == "all" {
		return "every agent"
	}
	return scope + " " + target
}

// freezer names who froze: the user, the operator, or the agent's group
// (an agent's freeze runs only once approved).
func freezer(ctx context.Context) string {
	c, _ := authn.FromContext(ctx)
	switch {
	case c.Principal.UserID != "":
		return c.Principal.UserID
	case c.Agent != nil:
		return "agent of " + c.Agent.GroupID
	case c.Principal.Kind == guardv1.Principal_PRINCIPAL_OPERATOR:
		return "operator"
	}
	return "unknown"
}

// sqlSessionsInScope are the active, placed sessions the freeze ($1 scope,
// $2 target) covers (the guard's freeze rule, guard.FreezeCovers); with $3,
// not those another freeze still covers.
var sqlSessionsInScope = `SELECT s.id FROM sessions s
		WHERE s.status = 'active' AND s.runner_id IS NOT NULL
		  AND ` + guard.FreezeCovers("$1", "$2", "s.agent_group_id", "s.runner_id") + `
		  AND NOT ($3 AND EXISTS (SELECT 1 FROM freezes f
		      WHERE ` + guard.FreezeCovers("f.scope", "f.target", "s.agent_group_id", "s.runner_id") + `))
		ORDER BY s.id`

// sessionsInScope are the active, placed sessions a freeze scope covers;
// unfrozen leaves out those another freeze still covers.
func sessionsInScope(ctx context.Context, tx pgx.Tx, scope, target string, unfrozen bool) ([]string, error) {
	rows, err := tx.Query(ctx, sqlSessionsInScope, scope, target, unfrozen)
	if err != nil {
		return nil, fmt.Errorf("sessions in freeze scope: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
