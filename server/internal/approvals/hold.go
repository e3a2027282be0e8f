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

// holdColumns is the one column list every hold read uses, named for
// holdRow's fields (readHold / holdFromRow scan it by name).
const holdColumns = `id, kind, catalog_action, payload, COALESCE(session_id, '') AS session_id,
	COALESCE(agent_group_id, '') AS agent_group_id, requester, COALESCE(approver_user_id, '') AS approver_user_id,
	approver_rule, approver_scope, COALESCE(dedup_key, '') AS dedup_key, expires_at, status, title, question, options,
	COALESCE(delivered_to, '') AS delivered_to, origin_channel_type, delivery_action, created_at, resolved_at,
	resolver, choice, reason, consumed_at IS NOT NULL AS consumed, awaiting_reason_from, also_approvers,
	also_delivered_to, approvals_required,
	COALESCE((SELECT jsonb_agg(jsonb_build_object('user_id', a.user_id, 'at', a.approved_at, 'counted', a.counted) ORDER BY a.approved_at, a.user_id)
		FROM hold_approvals a WHERE a.hold_id = holds.id), '[]') AS approvals,
	resource, unapplied_reason, remind_at, escalate_at, escalate_to, reminded_at, escalated_at, escalated_to,
	COALESCE((SELECT st.step_up FROM action_settings st WHERE st.action = holds.catalog_action), false) AS step_up_marked`

// holdRow is one row of holdColumns as stored; proto turns it into the
// Hold every caller shares.
type holdRow struct {
	ID                 string            `db:"id"`
	Kind               string            `db:"kind"`
	CatalogAction      string            `db:"catalog_action"`
	Payload            []byte            `db:"payload"`
	SessionID          string            `db:"session_id"`
	AgentGroupID       string            `db:"agent_group_id"`
	Requester          []byte            `db:"requester"`
	ApproverUserID     string            `db:"approver_user_id"`
	ApproverRule       string            `db:"approver_rule"`
	ApproverScope      string            `db:"approver_scope"`
	DedupKey           string            `db:"dedup_key"`
	ExpiresAt          *time.Time        `db:"expires_at"`
	Status             string            `db:"status"`
	Title              string            `db:"title"`
	Question           string            `db:"question"`
	Options            []byte            `db:"options"`
	DeliveredTo        string            `db:"delivered_to"`
	OriginChannelType  string            `db:"origin_channel_type"`
	DeliveryAction     string            `db:"delivery_action"`
	CreatedAt          time.Time         `db:"created_at"`
	ResolvedAt         *time.Time        `db:"resolved_at"`
	Resolver           string            `db:"resolver"`
	Choice             string            `db:"choice"`
	Reason             string            `db:"reason"`
	Consumed           bool              `db:"consumed"`
	AwaitingReasonFrom string            `db:"awaiting_reason_from"`
	AlsoApprovers      []string          `db:"also_approvers"`
	AlsoDeliveredTo    []string          `db:"also_delivered_to"`
	ApprovalsRequired  int32             `db:"approvals_required"`
	Approvals          []byte            `db:"approvals"`
	Resource           map[string]string `db:"resource"`
	UnappliedReason    string            `db:"unapplied_reason"`
	RemindAt           *time.Time        `db:"remind_at"`
	EscalateAt         *time.Time        `db:"escalate_at"`
	EscalateTo         []string          `db:"escalate_to"`
	RemindedAt         *time.Time        `db:"reminded_at"`
	EscalatedAt        *time.Time        `db:"escalated_at"`
	EscalatedTo        []string          `db:"escalated_to"`
	StepUpMarked       bool              `db:"step_up_marked"`
}

// tracedHoldRow is a row of holdColumns followed by the hold's
// trace_parent (a resolution that replays it needs its trace context).
type tracedHoldRow struct {
	holdRow
	TraceParent string `db:"trace_parent"`
}

// holdFromRow reads one row selected with holdColumns (a pgx.RowToFunc).
func holdFromRow(row pgx.CollectableRow) (*guardv1.Hold, error) {
	r, err := pgx.RowToStructByName[holdRow](row)
	if err != nil {
		return nil, err
	}
	return r.proto()
}

// readHold runs a statement that returns holdColumns and reads its first
// row (pgx.ErrNoRows when there is none).
func readHold(ctx context.Context, q store.Querier, sql string, args ...any) (*guardv1.Hold, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectOneRow(rows, holdFromRow)
}

func (r holdRow) proto() (*guardv1.Hold, error) {
	h := &guardv1.Hold{
		Id: r.ID, Kind: r.Kind, CatalogAction: r.CatalogAction, SessionId: r.SessionID, AgentGroupId: r.AgentGroupID,
		DedupKey: r.DedupKey, Title: r.Title, Question: r.Question, DeliveredTo: r.DeliveredTo,
		OriginChannelType: r.OriginChannelType, DeliveryAction: r.DeliveryAction, Resolver: r.Resolver,
		Choice: r.Choice, Reason: r.Reason, Consumed: r.Consumed, AwaitingReasonFrom: r.AwaitingReasonFrom,
		AlsoDeliveredTo: r.AlsoDeliveredTo, ApprovalsRequired: r.ApprovalsRequired, UnappliedReason: r.UnappliedReason,
		CreatedAt: timestamppb.New(r.CreatedAt), EscalateTo: r.EscalateTo, EscalatedTo: r.EscalatedTo,
		RemindAt: stamp(r.RemindAt), EscalateAt: stamp(r.EscalateAt), RemindedAt: stamp(r.RemindedAt), EscalatedAt: stamp(r.EscalatedAt),
	}
	// Whether an approval needs a step-up: a global-scope admin command (the
	// D1 blast radius) or an action marked so (ncl catalog set --step-up).
	// Resolve and its standing-grant check read it from here, under the
	// hold's lock.
	h.StepUp = r.StepUpMarked || (r.Kind == adminCommandKind && r.ApproverScope == enumword.String(guardv1.ApproverScope_APPROVER_SCOPE_GLOBAL))
	if len(r.Resource) > 0 {
		h.Resource = r.Resource
	}
	if len(r.Payload) > 0 {
		h.Payload = &structpb.Struct{}
		if err := protojson.Unmarshal(r.Payload, h.Payload); err != nil {
			return nil, fmt.Errorf("hold %s: payload: %w", h.Id, err)
		}
	}
	if len(r.Requester) > 0 && string(r.Requester) != "{}" {
		h.Requester = &guardv1.Actor{}
		if err := protojson.Unmarshal(r.Requester, h.Requester); err != nil {
			return nil, fmt.Errorf("hold %s: requester: %w", h.Id, err)
		}
	}
	var opts []holdOption
	if err := json.Unmarshal(r.Options, &opts); err != nil {
		return nil, fmt.Errorf("hold %s: options: %w", h.Id, err)
	}
	for _, o := range opts {
		h.Options = append(h.Options, &guardv1.HoldOption{Label: o.Label, Value: o.Value})
	}
	var given []struct {
		UserID  string    `json:"user_id"`
		At      time.Time `json:"at"`
		Counted *bool     `json:"counted"` // set once the quorum was met
	}
	if err := json.Unmarshal(r.Approvals, &given); err != nil {
		return nil, fmt.Errorf("hold %s: approvals: %w", h.Id, err)
	}
	for _, a := range given {
		h.Approvals = append(h.Approvals, &guardv1.HoldApproval{UserId: a.UserID, At: timestamppb.New(a.At),
			Ineligible: a.Counted != nil && !*a.Counted})
	}
	h.ApproverRule = ruleOf(r.ApproverRule, r.ApproverUserID, h.AgentGroupId)
	if ex := h.ApproverRule.GetExclusive(); ex != nil {
		ex.AlsoUserIds = r.AlsoApprovers
	}
	// Whom the escalation added may resolve it too (MayResolveWithRoles).
	h.ApproverRule.EscalatedUserIds = r.EscalatedTo
	if len(r.EscalatedTo) > 0 {
		h.ApproverRule.EscalatedBecause = r.EscalateTo
	}
	var err error
	if h.ApproverScope, err = enumword.Parse[guardv1.ApproverScope](r.ApproverScope); err != nil {
		return nil, fmt.Errorf("hold %s: approver scope: %w", h.Id, err)
	}
	if h.Status, err = enumword.Parse[guardv1.HoldStatus](r.Status); err != nil {
		return nil, fmt.Errorf("hold %s: status: %w", h.Id, err)
	}
	if r.ExpiresAt != nil {
		h.ExpiresAt = timestamppb.New(*r.ExpiresAt)
	}
	if r.ResolvedAt != nil {
		h.ResolvedAt = timestamppb.New(*r.ResolvedAt)
	}
	return h, nil
}

// stamp is a nullable column's timestamp (nil stays unset).
func stamp(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(*t)
}

// GetHold reads one hold (pgx.ErrNoRows when absent).
func GetHold(ctx context.Context, q store.Querier, id string) (*guardv1.Hold, error) {
	return readHold(ctx, q, `SELECT `+holdColumns+` FROM holds WHERE id = $1`, id)
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

// adminCommandKind is the hold kind of an agent's admin command
// (commands.ApprovalAction; approvals does not import the domain).
const adminCommandKind = "cli_command"

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
