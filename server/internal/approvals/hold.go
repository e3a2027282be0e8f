package approvals

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/store"
)

// holdColumns is the one column list every hold read uses (HoldFromRow
// scans it in this order).
const holdColumns = `id, kind, catalog_action, payload, COALESCE(session_id, ''), COALESCE(agent_group_id, ''),
	requester, COALESCE(approver_user_id, ''), approver_rule, approver_scope, COALESCE(dedup_key, ''),
	expires_at, status, title, question, options, COALESCE(delivered_to, ''), origin_channel_type,
	delivery_action, created_at, resolved_at, resolver, choice, reason, consumed_at IS NOT NULL, awaiting_reason_from,
	also_approvers, also_delivered_to, approvals_required, COALESCE((SELECT jsonb_agg(jsonb_build_object('user_id', a.user_id, 'at', a.approved_at) ORDER BY a.approved_at, a.user_id)
		FROM hold_approvals a WHERE a.hold_id = holds.id), '[]'), resource, unapplied_reason`

// HoldColumns is the column list HoldFromRow scans, for
// "SELECT " + HoldColumns() + " FROM holds ..." (unqualified column names).
func HoldColumns() string { return holdColumns }

// HoldFromRow scans one row selected with HoldColumns into the proto every
// caller shares.
func HoldFromRow(row pgx.Row) (*guardv1.Hold, error) {
	var (
		h                                 guardv1.Hold
		payload, requester, options       []byte
		approvals                         []byte
		also                              []string
		approverUser, rule, scope, status string
		expires, resolved                 *time.Time
		created                           time.Time
	)
	err := row.Scan(&h.Id, &h.Kind, &h.CatalogAction, &payload, &h.SessionId, &h.AgentGroupId,
		&requester, &approverUser, &rule, &scope, &h.DedupKey,
		&expires, &status, &h.Title, &h.Question, &options, &h.DeliveredTo, &h.OriginChannelType,
		&h.DeliveryAction, &created, &resolved, &h.Resolver, &h.Choice, &h.Reason, &h.Consumed, &h.AwaitingReasonFrom,
		&also, &h.AlsoDeliveredTo, &h.ApprovalsRequired, &approvals, &h.Resource, &h.UnappliedReason)
	if err != nil {
		return nil, err
	}
	if len(h.Resource) == 0 {
		h.Resource = nil
	}
	if len(payload) > 0 {
		h.Payload = &structpb.Struct{}
		if err := protojson.Unmarshal(payload, h.Payload); err != nil {
			return nil, fmt.Errorf("hold %s: payload: %w", h.Id, err)
		}
	}
	if len(requester) > 0 && string(requester) != "{}" {
		h.Requester = &guardv1.Actor{}
		if err := protojson.Unmarshal(requester, h.Requester); err != nil {
			return nil, fmt.Errorf("hold %s: requester: %w", h.Id, err)
		}
	}
	var opts []holdOption
	if err := json.Unmarshal(options, &opts); err != nil {
		return nil, fmt.Errorf("hold %s: options: %w", h.Id, err)
	}
	for _, o := range opts {
		h.Options = append(h.Options, &guardv1.HoldOption{Label: o.Label, Value: o.Value})
	}
	var given []struct {
		UserID string    `json:"user_id"`
		At     time.Time `json:"at"`
	}
	if err := json.Unmarshal(approvals, &given); err != nil {
		return nil, fmt.Errorf("hold %s: approvals: %w", h.Id, err)
	}
	for _, a := range given {
		h.Approvals = append(h.Approvals, &guardv1.HoldApproval{UserId: a.UserID, At: timestamppb.New(a.At)})
	}
	h.ApproverRule = ruleOf(rule, approverUser, h.AgentGroupId)
	if ex := h.ApproverRule.GetExclusive(); ex != nil {
		ex.AlsoUserIds = also
	}
	if h.ApproverScope, err = enumword.Parse[guardv1.ApproverScope](scope); err != nil {
		return nil, fmt.Errorf("hold %s: approver scope: %w", h.Id, err)
	}
	if h.Status, err = enumword.Parse[guardv1.HoldStatus](status); err != nil {
		return nil, fmt.Errorf("hold %s: status: %w", h.Id, err)
	}
	h.CreatedAt = timestamppb.New(created)
	if expires != nil {
		h.ExpiresAt = timestamppb.New(*expires)
	}
	if resolved != nil {
		h.ResolvedAt = timestamppb.New(*resolved)
	}
	return &h, nil
}

// GetHold reads one hold (pgx.ErrNoRows when absent).
func GetHold(ctx context.Context, q store.Querier, id string) (*guardv1.Hold, error) {
	return HoldFromRow(q.QueryRow(ctx, `SELECT `+holdColumns+` FROM holds WHERE id = $1`, id))
}

// holdOption is the JSON shape of holds.options.
type holdOption struct {
	Label string `json:"label"`
	Value string `json:"value"`
}

// ruleOf is the approver rule a row encodes (the seed's approverRuleOf): a
// malformed exclusive rule without a named user falls back to the admin
// chain rather than bricking the hold.
func ruleOf(rule, approverUser, groupID string) *guardv1.ApproverRule {
	if rule == ruleExclusive && approverUser != "" {
		return &guardv1.ApproverRule{Kind: &guardv1.ApproverRule_Exclusive{Exclusive: &guardv1.ExclusiveApprover{UserId: approverUser}}}
	}
	deliveredTo := approverUser
	if rule == ruleExclusive {
		deliveredTo = ""
	}
	return &guardv1.ApproverRule{Kind: &guardv1.ApproverRule_AdminsOfScope{AdminsOfScope: &guardv1.AdminsOfScope{AgentGroupId: groupID, DeliveredTo: deliveredTo}}}
}

const (
	ruleExclusive     = "exclusive"
	ruleAdminsOfScope = "admins-of-scope"
)

// scopeWord stores a scope; unspecified is the seed's default, 'group'.
func scopeWord(s guardv1.ApproverScope) (string, error) {
	if s == guardv1.ApproverScope_APPROVER_SCOPE_UNSPECIFIED {
		s = guardv1.ApproverScope_APPROVER_SCOPE_GROUP
	}
	return enumword.Word(s)
}

// resolvedStatus is the status a resolution outcome leaves a hold in.
var resolvedStatus = map[guardv1.Outcome]guardv1.HoldStatus{
	guardv1.Outcome_OUTCOME_APPROVE: guardv1.HoldStatus_HOLD_STATUS_APPROVED,
	guardv1.Outcome_OUTCOME_REJECT:  guardv1.HoldStatus_HOLD_STATUS_REJECTED,
	guardv1.Outcome_OUTCOME_EXPIRE:  guardv1.HoldStatus_HOLD_STATUS_EXPIRED,
	guardv1.Outcome_OUTCOME_SWEEP:   guardv1.HoldStatus_HOLD_STATUS_SWEPT,
}

// resolutionWords are the holds.status and hold_events.outcome values of a
// resolution; an outcome that resolves no hold is an error.
func resolutionWords(o guardv1.Outcome) (status, outcome string, err error) {
	st, ok := resolvedStatus[o]
	if !ok {
		return "", "", fmt.Errorf("outcome %s resolves no hold", enumword.String(o))
	}
	if status, err = enumword.Word(st); err == nil {
		outcome, err = enumword.Word(o)
	}
	return status, outcome, err
}
