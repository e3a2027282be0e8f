package approvals

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/sessions"
)

// Who may approve a hold about to be made, and how many must: read once
// (approversTx), then judged by small pure rules (quorumOf, unreachable),
// so a hold that cannot reach its quorum is never made — for every kind of
// gate — and the requester, the decision log and a dry run all say why and
// what would fix it.

// holdAnchor is who a hold is for: its approver rule, anchor group and the
// chat it came from.
type holdAnchor struct {
	rule        string // ruleExclusive or ruleAdminsOfScope
	exclusiveID string
	alsoIDs     []string // further named approvers of an exclusive rule
	namedDeliv  string   // the recorded delivered-to approver of an admins-of-scope rule
	groupID     string
	origin      string
	global      bool
}

// anchorTx reads what a hold request leaves to the database (its session's
// group and chat) and decodes its rule.
func anchorTx(ctx context.Context, tx pgx.Tx, req CreateRequest) (holdAnchor, error) {
	a := holdAnchor{origin: req.OriginChannel, groupID: req.AgentGroupID, global: req.Scope == guardv1.ApproverScope_APPROVER_SCOPE_GLOBAL}
	if req.SessionID != "" {
		sessGroup, sessChannel, err := sessions.OriginTx(ctx, tx, req.SessionID)
		if err != nil {
			return a, fmt.Errorf("create hold: session %s: %w", req.SessionID, err)
		}
		if a.groupID == "" {
			a.groupID = sessGroup
		}
		if a.origin == "" {
			a.origin = sessChannel
		}
	}
	// The rule's columns: exclusive → approver_user_id is the one user;
	// admins-of-scope → agent_group_id is the anchor and approver_user_id
	// the recorded delivered-to approver (if any).
	rule := req.Rule
	if rule == nil {
		rule = &guardv1.ApproverRule{Kind: &guardv1.ApproverRule_AdminsOfScope{AdminsOfScope: &guardv1.AdminsOfScope{}}}
	}
	switch r := rule.GetKind().(type) {
	case *guardv1.ApproverRule_Exclusive:
		a.rule, a.exclusiveID = ruleExclusive, r.Exclusive.GetUserId()
		if a.exclusiveID == "" {
			return a, errors.New("create hold: exclusive approver rule names no user")
		}
		a.alsoIDs = distinctOthers(a.exclusiveID, r.Exclusive.GetAlsoUserIds())
	case *guardv1.ApproverRule_AdminsOfScope:
		a.rule, a.namedDeliv = ruleAdminsOfScope, r.AdminsOfScope.GetDeliveredTo()
		if g := r.AdminsOfScope.GetAgentGroupId(); g != "" {
			a.groupID = g
		}
	default:
		return a, errors.New("create hold: approver rule has no kind")
	}
	return a, nil
}

// approvers is who may approve a hold about to be made, and how many must.
type approvers struct {
	candidates []candidate
	missing    []string // named approvers (an exclusive rule's) who are not users
	required   int
	plan       EscalationPlan
	// why no hold may be made, and how to fix it; "" when one may.
	unreachable string
}

// quorumParts are the settings a hold's quorum is the largest of.
type quorumParts struct {
	scope, action, group int
}

// approversTx reads, in one round trip, the users who may approve the hold
// a, the settings its quorum comes from and its escalation plan, and judges
// whether it can be approved at all.
func (s *Service) approversTx(ctx context.Context, tx pgx.Tx, req CreateRequest, a holdAnchor) (approvers, error) {
	var (
		out   approvers
		parts quorumParts
	)
	reads := &pgx.Batch{}
	queuePickApprovers(reads, &out.candidates, &out.missing, a.rule, append([]string{a.exclusiveID}, a.alsoIDs...), a.namedDeliv, a.groupID, a.global)
	chain := a.rule == ruleAdminsOfScope && !choiceCard(req.Options)
	if chain {
		s.queueQuorumParts(reads, &parts, req.CatalogAction, a.groupID, a.global)
	}
	queueEscalationPlan(reads, &out.plan, req, a.rule, a.groupID)
	if err := tx.SendBatch(ctx, reads).Close(); err != nil {
		return out, err
	}
	var source string
	out.required, source = quorumOf(req, a, parts, chain)
	out.unreachable = unreachable(req, a, out, source)
	return out, nil
}

// ReachableTx says why the hold req describes could not be made now, and
// what would fix it ("" when it could): a dry run's check (ncl explain), so
// it answers what the decision would. It only reads.
func (s *Service) ReachableTx(ctx context.Context, tx pgx.Tx, req CreateRequest) (string, error) {
	if req.AgentGroupID != "" {
		// A what-if may name a session that does not exist: its group is
		// the anchor, and the chat it came from changes no approver.
		req.SessionID = ""
	}
	a, err := anchorTx(ctx, tx, req)
	if err != nil {
		return "", err
	}
	ap, err := s.approversTx(ctx, tx, req, a)
	return ap.unreachable, err
}

// quorumOf is the number of distinct approvals a hold needs and where that
// number comes from (for the fix): an admin-chain hold needs what the
// scope, the action and the group ask, and what its decision's own rule
// asks (an MCP tool's setting); an exclusive hold what its own rule asks (a
// message policy's approvals), since only its named users may approve it.
func quorumOf(req CreateRequest, a holdAnchor, p quorumParts, chain bool) (int, string) {
	n, source := max(req.Approvals, 1), ""
	if req.Approvals > 1 {
		source = "the approvals of the setting that held it"
		switch {
		case a.rule == ruleExclusive:
			source = "the message policy's approvals (ncl policies set … --approvals)"
		case req.CatalogAction == "mcp.call":
			source = "the MCP tool's setting (ncl mcp tools set … --approvals, or the server's default)"
		}
	}
	if !chain {
		return n, source
	}
	scopeFlag := "--group-hold-approvals"
	if a.global {
		scopeFlag = "--global-hold-approvals"
	}
	for _, c := range []struct {
		n     int
		words string
	}{
		{p.scope, "the server's " + scopeFlag},
		{p.action, fmt.Sprintf("catalog action %s's approvals (ncl catalog set --action %s --approvals)", req.CatalogAction, req.CatalogAction)},
		{p.group, "group " + a.groupID + "'s hold approvals (ncl groups config update " + a.groupID + " --hold-approvals)"},
	} {
		if c.n > n {
			n, source = c.n, c.words
		}
	}
	return n, source
}

// unreachable is why no hold may be made with these approvers, and the fix;
// "" when the quorum can be met.
func unreachable(req CreateRequest, a holdAnchor, ap approvers, source string) string {
	switch {
	case len(ap.missing) > 0 && len(ap.candidates) < ap.required:
		return fmt.Sprintf("the approver(s) its policy names are not users: %s (fix: create them with ncl users create, or name existing users with ncl policies set)",
			strings.Join(ap.missing, ", "))
	case len(ap.candidates) == 0 && a.rule == ruleExclusive:
		return fmt.Sprintf("the named approver %s is not an owner or global admin, and this action needs one (fix: name an owner or global admin, or make %s one)",
			a.exclusiveID, a.exclusiveID)
	case len(ap.candidates) == 0 && (a.global || a.groupID == ""):
		return "no owner or global admin exists to approve it (fix: ncl roles grant --user <user> --role owner --scope global)"
	case len(ap.candidates) == 0:
		return fmt.Sprintf("no one may approve it: group %s has no admin and there is no global admin or owner (fix: ncl roles grant --user <user> --role admin --scope group --group %s)",
			a.groupID, a.groupID)
	case len(ap.candidates) < ap.required:
		more := ap.required - len(ap.candidates)
		return fmt.Sprintf("it needs %d distinct approvals (%s) but %s (fix: %s, or lower %s)",
			ap.required, source, mayApproveWords(ap.candidates), addApprovers(a, more), source)
	}
	return ""
}

// mayApproveWords says who may approve today: "only telegram:dana may
// approve it", "only 2 users may approve it (…)".
func mayApproveWords(cs []candidate) string {
	if len(cs) == 1 {
		return "only " + cs[0].id + " may approve it"
	}
	return fmt.Sprintf("only %d users may approve it (%s)", len(cs), candidateIDs(cs))
}

// addApprovers is the command that makes more users eligible for a hold
// with this anchor: more named approvers for an exclusive rule, else an
// admin role that reaches its scope.
func addApprovers(a holdAnchor, more int) string {
	who := "one more user"
	if more > 1 {
		who = fmt.Sprintf("%d more users", more)
	}
	switch {
	case a.rule == ruleExclusive:
		return "name " + who + " in the message policy (ncl policies set … --approver <user>, repeated)"
	case a.global || a.groupID == "":
		return "make " + who + " a global admin (ncl roles grant --user <user> --role admin --scope global)"
	}
	return "make " + who + " an admin of group " + a.groupID + " (ncl roles grant --user <user> --role admin --scope group --group " + a.groupID + ")"
}

func candidateIDs(cs []candidate) string {
	ids := make([]string, len(cs))
	for i, c := range cs {
		ids[i] = c.id
	}
	return strings.Join(ids, ", ")
}

// queueQuorumParts queues the read of the settings a hold's quorum is the
// largest of onto b: its approver scope's default, its catalog action's
// setting and its anchor group's; *p is set when b's results are read.
func (s *Service) queueQuorumParts(b *pgx.Batch, p *quorumParts, action, group string, global bool) {
	p.scope = max(s.cfg.GroupHoldApprovals, 1)
	if global {
		p.scope = max(s.cfg.GlobalHoldApprovals, 1)
	}
	b.Queue(`SELECT COALESCE((SELECT approvals FROM action_settings WHERE action = $1), 0),
			COALESCE((SELECT hold_approvals FROM container_configs WHERE agent_group_id = NULLIF($2, '')), 0)`,
		action, group).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(&p.action, &p.group); err != nil {
			return fmt.Errorf("create hold: quorum: %w", err)
		}
		return nil
	})
}

// candidate is an eligible approver and the channel types of their known DMs.
type candidate struct {
	id, name string // name: the user's display name ("" when none)
	dms      []string
}

// queuePickApprovers queues the read of the users who may resolve the hold
// onto b: in delivery preference order, de-duplicated, with their DMs (one
// query); *out is set when b's results are read, and *missing to the named
// approvers who are not users (they can never click).
func queuePickApprovers(b *pgx.Batch, out *[]candidate, missing *[]string, rule string, exclusive []string, named, groupID string, global bool) {
	if rule == ruleExclusive {
		queueNamedApprovers(b, out, missing, exclusive, global)
		return
	}
	queueChainApprovers(b, out, named, groupID, global)
}

// queueNamedApprovers queues the read of an exclusive rule's users: each
// named user, in the rule's order; on a global hold only those who are
// owners or global admins (D1). *missing gets the named who are no users.
func queueNamedApprovers(b *pgx.Batch, out *[]candidate, missing *[]string, exclusive []string, global bool) {
	b.Queue(`SELECT u.id, COALESCE((SELECT display_name FROM users WHERE id = u.id), ''), EXISTS (SELECT 1 FROM users WHERE id = u.id),
			EXISTS (SELECT 1 FROM user_roles WHERE user_id = u.id AND (role = 'owner' OR (role = 'admin' AND agent_group_id IS NULL))),
			ARRAY(SELECT channel_type FROM user_dms WHERE user_id = u.id ORDER BY channel_type)
		FROM unnest($1::text[]) WITH ORDINALITY AS u(id, n) ORDER BY u.n`, exclusive).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var (
				c         candidate
				user, top bool
			)
			if err := rows.Scan(&c.id, &c.name, &user, &top, &c.dms); err != nil {
				return fmt.Errorf("pick approvers: %w", err)
			}
			switch {
			case !user:
				*missing = append(*missing, c.id)
			case !global || top:
				*out = append(*out, c)
			}
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("pick approvers: %w", err)
		}
		return nil
	})
}

// queueChainApprovers queues the read of an admin chain's users: the named
// delivered-to user, the anchor group's scoped admins (not on a global
// hold: they may not resolve it), global admins, owners, each by grant
// time, de-duplicated; on a global hold the named user first, when an
// owner or global admin.
func queueChainApprovers(b *pgx.Batch, out *[]candidate, named, groupID string, global bool) {
	// tier -1: the named delivered-to user; 0: scoped admins of the anchor;
	// 1: global admins; 2: owners.
	b.Queue(`SELECT r.user_id, COALESCE((SELECT display_name FROM users WHERE id = r.user_id), ''), r.tier,
			ARRAY(SELECT channel_type FROM user_dms d WHERE d.user_id = r.user_id ORDER BY channel_type)
		FROM (
			SELECT NULLIF($3, '') AS user_id, -1 AS tier, NULL::timestamptz AS granted_at
			UNION ALL
			SELECT user_id, CASE WHEN role = 'owner' THEN 2 WHEN agent_group_id IS NULL THEN 1 ELSE 0 END, granted_at
			  FROM user_roles
			 WHERE role = 'owner'
			    OR (role = 'admin' AND agent_group_id IS NULL)
			    OR (role = 'admin' AND NOT $2 AND agent_group_id = NULLIF($1, ''))
		) r WHERE r.user_id IS NOT NULL
		ORDER BY r.tier, r.granted_at, r.user_id`, groupID, global, named).Query(func(rows pgx.Rows) error {
		seen := map[string]bool{}
		var list []candidate
		namedIsTop := false
		for rows.Next() {
			var (
				c    candidate
				tier int
			)
			if err := rows.Scan(&c.id, &c.name, &tier, &c.dms); err != nil {
				return fmt.Errorf("pick approvers: %w", err)
			}
			switch {
			case tier == -1 && global:
				// On a global hold the named user counts only as an owner or
				// global admin (then delivered to first, below).
				continue
			case c.id == named && tier >= 1:
				namedIsTop = true
			}
			if !seen[c.id] {
				seen[c.id] = true
				list = append(list, c)
			}
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("pick approvers: %w", err)
		}
		if global && namedIsTop {
			for i, c := range list {
				if c.id == named {
					list = append([]candidate{c}, append(list[:i:i], list[i+1:]...)...)
					break
				}
			}
		}
		*out = list
		return nil
	})
}
