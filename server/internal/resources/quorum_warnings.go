package resources

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/clawguard/clawguard/server/internal/store"
)

// Settings that cannot work are refused, or named, when they are made
// (issue 41): a policy naming someone who is not a user is refused; a
// quorum that some group's eligible approvers cannot meet today is taken,
// with a warning naming who may approve and how many are missing — the
// approvals service then refuses to make such a hold (the agent is denied,
// told why), until an approver is added or the quorum lowered.

// maxWarnings bounds the warnings of one setting (one a group).
const maxWarnings = 10

// unknownUsers refuses user ids that are not users (field names the
// request field, for the error).
func unknownUsers(ctx context.Context, q store.Querier, field string, ids []string) error {
	rows, err := q.Query(ctx, `SELECT u FROM unnest($1::text[]) AS u WHERE NOT EXISTS (SELECT 1 FROM users WHERE id = u)`, ids)
	if err != nil {
		return err
	}
	missing, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return invalid(field, "%s %s not a user: nobody could ever approve as them (ncl users create %s first)",
			strings.Join(missing, ", "), map[bool]string{true: "is", false: "are"}[len(missing) == 1], missing[0])
	}
	return nil
}

// quorumWarnings names every group (only group, when set) whose eligible
// approvers today — its scoped admins, the global admins and the owners —
// are fewer than n, and, unless only one group is asked about, the
// global-scope holds when the owners and global admins are; what the
// setting is (for the words).
func quorumWarnings(ctx context.Context, q store.Querier, n int32, group, setting string) ([]string, error) {
	if n <= 1 {
		return nil, nil
	}
	rows, err := q.Query(ctx, `WITH top AS (SELECT DISTINCT user_id FROM user_roles WHERE role = 'owner' OR (role = 'admin' AND agent_group_id IS NULL))
		SELECT g.id, g.name, ARRAY(SELECT user_id FROM top UNION SELECT user_id FROM user_roles WHERE role = 'admin' AND agent_group_id = g.id ORDER BY 1)
		  FROM agent_groups g WHERE $1 = '' OR g.id = $1
		UNION ALL
		SELECT '', '', ARRAY(SELECT user_id FROM top ORDER BY 1) WHERE $1 = ''
		ORDER BY 2, 1`, group)
	if err != nil {
		return nil, err
	}
	type eligible struct {
		id, name string
		users    []string
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (eligible, error) {
		var e eligible
		return e, r.Scan(&e.id, &e.name, &e.users)
	})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range all {
		if len(e.users) >= int(n) {
			continue
		}
		who := "nobody"
		if len(e.users) > 0 {
			who = strings.Join(slices.Compact(e.users), ", ")
		}
		where, fix := "global-scope holds (owners and global admins)", "ncl roles grant --user <user> --role admin --scope global"
		if e.id != "" {
			where = fmt.Sprintf("group %s (%s)", e.name, e.id)
			fix = "ncl roles grant --user <user> --role admin --scope group --group " + e.id
		}
		out = append(out, fmt.Sprintf("%s needs %d approvals, but %s may approve only %d today (%s): %d approver(s) missing, so its holds are denied until then (%s)",
			setting, n, where, len(e.users), who, int(n)-len(e.users), fix))
	}
	if len(out) > maxWarnings {
		out = append(out[:maxWarnings], fmt.Sprintf("…and %d more groups whose approvers cannot meet %s today", len(out)-maxWarnings, setting))
	}
	return out, nil
}
