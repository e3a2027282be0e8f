package approvals

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/store"
)

// Roles is what the click rule needs to know about a user.
type Roles struct {
	Owner       bool
	GlobalAdmin bool
	// AdminOf lists the groups the user is a scoped admin of.
	AdminOf map[string]bool
}

// add records one user_roles row (group "" = a global grant).
func (r *Roles) add(role, group string) {
	switch {
	case role == "owner":
		r.Owner = true
	case role == "admin" && group == "":
		r.GlobalAdmin = true
	case role == "admin":
		if r.AdminOf == nil {
			r.AdminOf = map[string]bool{}
		}
		r.AdminOf[group] = true
	}
}

// LoadRoles reads a user's roles in one query.
func LoadRoles(ctx context.Context, q store.Querier, userID string) (Roles, error) {
	rows, err := q.Query(ctx, rolesQuery, userID)
	if err != nil {
		return Roles{}, fmt.Errorf("read roles of %s: %w", userID, err)
	}
	return scanRoles(rows, userID)
}

const rolesQuery = `SELECT role, COALESCE(agent_group_id, '') FROM user_roles WHERE user_id = $1`

func scanRoles(rows pgx.Rows, userID string) (Roles, error) {
	r := Roles{AdminOf: map[string]bool{}}
	defer rows.Close()
	for rows.Next() {
		var role, group string
		if err := rows.Scan(&role, &group); err != nil {
			return r, fmt.Errorf("read roles of %s: %w", userID, err)
		}
		r.add(role, group)
	}
	if err := rows.Err(); err != nil {
		return r, fmt.Errorf("read roles of %s: %w", userID, err)
	}
	return r, nil
}

// MayResolve is the one click-authorization rule for every hold (the seed's
// mayResolve): may clicker (a namespaced user id) resolve a hold with this
// approver rule and scope? It reads the clicker's roles through q (pass the
// transaction that resolves, so the answer and the resolution agree).
func MayResolve(ctx context.Context, q store.Querier, rule *guardv1.ApproverRule, scope guardv1.ApproverScope, clicker string) (bool, error) {
	if clicker == "" || rule == nil {
		return false, nil
	}
	roles, err := LoadRoles(ctx, q, clicker)
	if err != nil {
		return false, err
	}
	return MayResolveWithRoles(rule, scope, clicker, roles), nil
}

// MayResolveWithRoles is MayResolve over roles already read (List filters
// many holds for one user with it).
//
//   - exclusive{user, also}: only those users — not even an owner.
//   - admins-of-scope{group, delivered_to}: the recorded delivered-to user,
//     or the group's admin chain (scoped admin, global admin, owner); with no
//     anchor group, owners and global admins only.
//   - escalated_user_ids (the hold's escalation, once it happened): those
//     users too, whatever the kind, while they still hold what added them
//     (stillEscalated).
//   - scope global (the D1 overlay): whatever the rule says, the clicker must
//     also be an owner or a global admin. An unspecified scope is the seed's
//     default, group.
func MayResolveWithRoles(rule *guardv1.ApproverRule, scope guardv1.ApproverScope, clicker string, roles Roles) bool {
	if clicker == "" || rule == nil {
		return false
	}
	top := roles.Owner || roles.GlobalAdmin
	globalScopeOK := scope != guardv1.ApproverScope_APPROVER_SCOPE_GLOBAL || top
	// An escalation adds approvers to any rule from the moment it is
	// recorded (never before: the list is empty until then).
	if slices.Contains(rule.GetEscalatedUserIds(), clicker) && stillEscalated(rule, clicker, roles) {
		return globalScopeOK
	}
	switch r := rule.GetKind().(type) {
	case *guardv1.ApproverRule_Exclusive:
		named := r.Exclusive.GetUserId() != "" && clicker == r.Exclusive.GetUserId()
		for _, u := range r.Exclusive.GetAlsoUserIds() {
			named = named || (u != "" && clicker == u)
		}
		return named && globalScopeOK
	case *guardv1.ApproverRule_AdminsOfScope:
		a := r.AdminsOfScope
		eligible := a.GetDeliveredTo() != "" && clicker == a.GetDeliveredTo()
		if !eligible {
			if g := a.GetAgentGroupId(); g != "" {
				eligible = top || roles.AdminOf[g]
			} else {
				eligible = top
			}
		}
		return eligible && globalScopeOK
	}
	// An empty rule resolves for nobody (fail closed).
	return false
}

// stillEscalated: what added clicker to the hold's approvers still holds —
// the escalation named them, or named a group they are still an admin of.
// The power came with the role, and goes with it.
func stillEscalated(rule *guardv1.ApproverRule, clicker string, roles Roles) bool {
	for _, e := range rule.GetEscalatedBecause() {
		if g, ok := strings.CutPrefix(e, "group:"); ok {
			if roles.AdminOf[g] {
				return true
			}
		} else if e == clicker {
			return true
		}
	}
	return false
}
