package resources

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/paging"
	"github.com/clawguard/clawguard/server/internal/store"
)

func scanPolicy(row pgx.Row) (*guardv1.MessagePolicy, error) {
	var (
		p    guardv1.MessagePolicy
		mode string
	)
	var esc escalationSettings
	if err := row.Scan(&p.FromGroup, &p.ToGroup, &p.ApproverUserId, &mode, &p.AlsoApproverUserIds, &p.Approvals,
		&esc.remindS, &esc.escalateS, &p.EscalateTo); err != nil {
		return nil, err
	}
	p.RemindAfter, p.EscalateAfter = seconds(esc.remindS), seconds(esc.escalateS)
	var err error
	if p.Mode, err = enumFromColumn[guardv1.EnforcementMode]("mode", mode); err != nil {
		return nil, fmt.Errorf("policy %s → %s: %w", p.FromGroup, p.ToGroup, err)
	}
	return &p, nil
}

const policyColumns = `from_agent_group_id, to_agent_group_id, approver_user_id, mode, also_approvers, approvals,
	remind_after_s, escalate_after_s, escalate_to`

// ListPolicies lists message policies the caller may see (either end in a
// visible group), optionally touching one group.
func (s *Service) ListPolicies(ctx context.Context, req *guardv1.ListPoliciesRequest) (_ *guardv1.ListPoliciesResponse, err error) {
	defer store.Faulted(&err, "policies")
	v, err := s.viewer(ctx)
	if err != nil {
		return nil, err
	}
	limit, err := paging.Limit(req.GetLimit())
	if err != nil {
		return nil, err
	}
	// Keyset paging (from, to), bound to the filter and the viewer.
	filter := paging.Filter("policies", v.all, v.groups, req.GetGroup())
	cur, err := paging.DecodeKey(req.GetPageToken(), filter)
	if err != nil {
		return nil, err
	}
	afterFrom, afterTo := "", ""
	if cur != nil {
		afterFrom, afterTo = cur.Key, cur.ID
	}
	rows, err := s.pool.Query(ctx, `SELECT `+policyColumns+` FROM agent_message_policies
		WHERE ($1 OR from_agent_group_id = ANY($2) OR to_agent_group_id = ANY($2))
		  AND ($3 = '' OR from_agent_group_id = $3 OR to_agent_group_id = $3)
		  AND ($5 = '' OR (from_agent_group_id, to_agent_group_id) > ($4, $5))
		ORDER BY from_agent_group_id, to_agent_group_id LIMIT $6`, v.all, v.groups, req.GetGroup(), afterFrom, afterTo, limit+1)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := &guardv1.ListPoliciesResponse{}
	for rows.Next() {
		if len(out.Policies) == limit {
			// One row past the page: there is a next one.
			last := out.Policies[limit-1]
			out.NextPageToken = paging.NextKey(last.GetFromGroup(), last.GetToGroup(), filter)
			break
		}
		p, err := scanPolicy(rows)
		if err != nil {
			return nil, err
		}
		out.Policies = append(out.Policies, p)
	}
	return out, rows.Err()
}

// SetPolicy sets or replaces the approver of messages from one group to
// another. Both groups must exist; the policy goes with either (foreign
// keys). Every approver it names must be a user (issue 41: a policy naming
// nobody made holds nobody could approve); a user deleted later is no
// approver, and a send the policy holds then denies (the seed's
// ghost-policy edge).
func (s *Service) SetPolicy(ctx context.Context, req *guardv1.SetPolicyRequest) (_ *guardv1.SetPolicyResponse, err error) {
	defer store.Faulted(&err, "policy")
	mode, also, err := checkSetPolicy(req)
	if err != nil {
		return nil, err
	}
	// A policy's mode ("" inherits a2a.send's) lets an operator roll a new
	// policy out in audit or warn before enforcing it. The holds the policy
	// made while they are pending follow it, in the same transaction: an
	// approver it no longer names can no longer approve, nor count toward a
	// quorum.
	esc, err := checkEscalation(req.GetRemindAfter(), req.GetEscalateAfter(), req.GetEscalateTo())
	if err != nil {
		return nil, err
	}
	var p *guardv1.MessagePolicy
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		if err := unknownUsers(ctx, tx, "approver_user_id", append([]string{req.GetApproverUserId()}, also...)); err != nil {
			return err
		}
		to, err := resolveApprovers(ctx, tx, esc.to)
		if err != nil {
			return err
		}
		p, err = scanPolicy(tx.QueryRow(ctx, `INSERT INTO agent_message_policies
				(from_agent_group_id, to_agent_group_id, approver_user_id, mode, also_approvers, approvals,
				 remind_after_s, escalate_after_s, escalate_to)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
			ON CONFLICT (from_agent_group_id, to_agent_group_id) DO UPDATE SET approver_user_id = EXCLUDED.approver_user_id,
				mode = EXCLUDED.mode, also_approvers = EXCLUDED.also_approvers, approvals = EXCLUDED.approvals,
				remind_after_s = EXCLUDED.remind_after_s, escalate_after_s = EXCLUDED.escalate_after_s, escalate_to = EXCLUDED.escalate_to,
				created_at = now()
			RETURNING `+policyColumns, req.GetFromGroup(), req.GetToGroup(), req.GetApproverUserId(), mode,
			also, req.GetApprovals(), esc.remindS, esc.escalateS, to))
		if err != nil || s.policyHolds == nil {
			return err
		}
		return s.policyHolds(ctx, tx, p)
	})
	if err != nil {
		return nil, err
	}
	return &guardv1.SetPolicyResponse{Policy: p}, nil
}

// RemovePolicy removes a policy.
func (s *Service) RemovePolicy(ctx context.Context, req *guardv1.RemovePolicyRequest) (_ *guardv1.RemovePolicyResponse, err error) {
	defer store.Faulted(&err, "policy")
	if err := checkPolicyEnds(req.GetFromGroup(), req.GetToGroup()); err != nil {
		return nil, err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM agent_message_policies WHERE from_agent_group_id = $1 AND to_agent_group_id = $2`,
		req.GetFromGroup(), req.GetToGroup())
	if err := affected(tag, err, "no policy from %q to %q", req.GetFromGroup(), req.GetToGroup()); err != nil {
		return nil, err
	}
	return &guardv1.RemovePolicyResponse{}, nil
}
