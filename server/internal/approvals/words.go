package approvals

import (
	"context"
	"fmt"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/holdview"
	"github.com/clawguard/clawguard/server/internal/store"
)

// What the requester of a hold is told — who may approve it, who approved
// or rejected it — names people and groups: holdview renders the words, this
// file reads the names.

// book is the names a hold's words need (holdview.Names).
type book struct{ users, groups map[string]string }

func (b book) UserName(id string) string  { return b.users[id] }
func (b book) GroupName(id string) string { return b.groups[id] }

// eligibleWords says who may approve a new hold: its eligible approvers by
// name, in delivery order.
func eligibleWords(cands []candidate, required int) string {
	b := book{users: map[string]string{}}
	ids := make([]string, len(cands))
	for i, c := range cands {
		ids[i], b.users[c.id] = c.id, c.name
	}
	return holdview.Eligible(ids, b, required)
}

// sqlHoldNames reads, in one statement, the display names of users $1, the
// approvals that met hold $2's quorum (kind 'a'), and the names of groups $3.
const sqlHoldNames = `SELECT 'u', id, display_name FROM users WHERE id = ANY($1)
	UNION ALL
	SELECT 'a', a.user_id, COALESCE(u.display_name, '') FROM hold_approvals a LEFT JOIN users u ON u.id = a.user_id
	 WHERE a.hold_id = $2 AND a.counted
	UNION ALL
	SELECT 'g', id, name FROM agent_groups WHERE id = ANY($3)`

// toldOf renders what the requester of a resolved hold is told, reading the
// names it needs: the hold as its words see it (with the approvals that
// counted) and the book.
func toldOf(ctx context.Context, q store.Querier, h *guardv1.Hold) (*guardv1.Hold, book, error) {
	b := book{users: map[string]string{}, groups: map[string]string{}}
	groups := []string{h.GetAgentGroupId(), h.GetResource()["to"], h.GetPayload().GetFields()["to"].GetStringValue()}
	rows, err := q.Query(ctx, sqlHoldNames, []string{h.GetResolver()}, h.GetId(), groups)
	if err != nil {
		return nil, b, fmt.Errorf("read the names of hold %s: %w", h.GetId(), err)
	}
	defer rows.Close()
	seen := &guardv1.Hold{Id: h.GetId(), Kind: h.GetKind(), Title: h.GetTitle(), Payload: h.GetPayload(), Resource: h.GetResource(),
		Resolver: h.GetResolver()}
	for rows.Next() {
		var kind, id, name string
		if err := rows.Scan(&kind, &id, &name); err != nil {
			return nil, b, fmt.Errorf("read the names of hold %s: %w", h.GetId(), err)
		}
		switch kind {
		case "g":
			b.groups[id] = name
		case "a":
			seen.Approvals = append(seen.Approvals, &guardv1.HoldApproval{UserId: id})
			fallthrough
		default:
			b.users[id] = name
		}
	}
	return seen, b, rows.Err()
}
