package resources

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/clawguard/clawguard/server/internal/store"
)

// Escalation settings (issue 32) of catalog actions and message policies:
// remind after, escalate after, escalate to. The holds take them when they
// are created (approvals.escalationPlan); the sweep acts on them.

// maxEscalationDelay bounds remind_after and escalate_after (a hold's TTL
// is days, not months).
const maxEscalationDelay = 30 * 24 * time.Hour

// escalationSettings is the stored form: whole seconds and resolved names.
type escalationSettings struct {
	remindS, escalateS int32
	to                 []string
}

// checkEscalation validates the request's plan, names left unresolved
// (the precheck has no database).
func checkEscalation(remind, escalate *durationpb.Duration, to []string) (escalationSettings, error) {
	var e escalationSettings
	var err error
	if e.remindS, err = delaySeconds("remind_after", remind); err != nil {
		return e, err
	}
	if e.escalateS, err = delaySeconds("escalate_after", escalate); err != nil {
		return e, err
	}
	for _, n := range to {
		if strings.TrimSpace(n) == "" {
			return e, invalid("escalate_to", "an empty name")
		}
	}
	switch {
	case e.escalateS > 0 && len(to) == 0:
		return e, invalid("escalate_to", "escalate_after needs escalate_to: the approvers to add")
	case e.escalateS == 0 && len(to) > 0:
		return e, invalid("escalate_after", "escalate_to needs escalate_after: when to add them")
	case e.remindS > 0 && e.escalateS > 0 && e.remindS >= e.escalateS:
		return e, invalid("remind_after", "%ds is not before escalate_after (%ds)", e.remindS, e.escalateS)
	}
	e.to = to
	return e, nil
}

func delaySeconds(field string, d *durationpb.Duration) (int32, error) {
	if d == nil {
		return 0, nil
	}
	if err := d.CheckValid(); err != nil {
		return 0, invalid(field, "%v", err)
	}
	v := d.AsDuration()
	if v < 0 || v > maxEscalationDelay || v%time.Second != 0 || (v > 0 && v < time.Second) {
		return 0, invalid(field, "%s: want whole seconds from 0 (never) to %s", v, maxEscalationDelay)
	}
	return int32(v / time.Second), nil
}

// resolveApprovers turns escalate_to names into what a hold stores: a user
// by id or display name (one user only), "group:NAME" by group name or id
// into "group:<id>" (its admins when the hold escalates). An unknown or
// ambiguous name is refused: a plan that names nobody would escalate to
// nobody.
func resolveApprovers(ctx context.Context, q store.Querier, names []string) ([]string, error) {
	out := []string{}
	add := func(v string) {
		for _, o := range out {
			if o == v {
				return
			}
		}
		out = append(out, v)
	}
	for _, raw := range names {
		n := strings.TrimSpace(raw)
		if g, ok := strings.CutPrefix(n, "group:"); ok {
			var id string
			err := q.QueryRow(ctx, `SELECT id FROM agent_groups WHERE id = $1 OR name = $1 ORDER BY id = $1 DESC LIMIT 1`, g).Scan(&id)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil, invalid("escalate_to", "no agent group %q (ncl groups list)", g)
			}
			if err != nil {
				return nil, err
			}
			add("group:" + id)
			continue
		}
		rows, err := q.Query(ctx, `SELECT id FROM users WHERE id = $1
			UNION ALL SELECT id FROM users WHERE display_name = $1 AND NOT EXISTS (SELECT 1 FROM users WHERE id = $1)`, n)
		if err != nil {
			return nil, err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, err
		}
		switch len(ids) {
		case 0:
			return nil, invalid("escalate_to", "no user %q (by id or name; ncl users list), and no group (write group:NAME)", n)
		case 1:
			add(ids[0])
		default:
			return nil, invalid("escalate_to", "%q names %d users (%s): use the id", n, len(ids), strings.Join(ids, ", "))
		}
	}
	return out, nil
}

// seconds is a stored delay as the API's duration (nil: never).
func seconds(s int32) *durationpb.Duration {
	if s <= 0 {
		return nil
	}
	return durationpb.New(time.Duration(s) * time.Second)
}
