package approvals

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/pushes"
)

// KindModeWarning is the kind of the notice a warned event carries.
const KindModeWarning = "mode_warning"

// NotifyWarning tells of a decision a warn-mode gate let run: the agent gets
// a WARNING notice in its session, and a warned event (a notice shaped like
// a card with no options, anchored to the agent's group) reaches that
// group's admins on Watch and the webhook. Best effort: the action already
// ran; a failure is logged.
func (s *Service) NotifyWarning(ctx context.Context, w guard.Warning) {
	if err := s.notifyWarning(ctx, w); err != nil {
		s.log.Error("warn-mode notice not delivered", "decision", w.DecisionID, "action", w.Request.Action, "err", err)
	}
}

func (s *Service) notifyWarning(ctx context.Context, w guard.Warning) error {
	req, d := w.Request, w.Decision
	group, _ := req.AgentGroup()
	text := fmt.Sprintf("Warning: %s ran because its gate is in warn mode; in enforce mode it would %s: %s",
		req.Action, wouldVerb(d.Would.Effect), d.Would.Reason)
	notice := &guardv1.Hold{
		Id: w.DecisionID, Kind: KindModeWarning, CatalogAction: req.Action,
		SessionId: req.Session(), AgentGroupId: group, Requester: req.Actor,
		ApproverRule:  guard.AdminsOfScope(group, ""),
		ApproverScope: guardv1.ApproverScope_APPROVER_SCOPE_GROUP,
		Title:         "warn mode: " + req.Action, Question: text,
		CreatedAt: timestamppb.Now(),
	}
	if p, err := structpb.NewStruct(req.Payload); err == nil {
		notice.Payload = p
	}
	body, err := protojson.Marshal(notice)
	if err != nil {
		return fmt.Errorf("encode notice: %w", err)
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if sess := req.Session(); sess != "" {
			push := &guardv1.Push{Body: &guardv1.Push_Notify{Notify: &guardv1.NotifyAgent{
				Kind: guardv1.NoticeKind_NOTICE_KIND_WARNING, Text: text}}}
			if _, err := pushes.EnqueueTx(ctx, tx, sess, push); err != nil {
				return fmt.Errorf("push warning to session: %w", err)
			}
		}
		err := insertEvent(ctx, tx, `INSERT INTO hold_events (hold_id, type, hold)
			SELECT $2, 'warned', $3 FROM (SELECT pg_advisory_xact_lock_shared($1)) AS compat`, previousReleaseEventLock, w.DecisionID, body)
		if err != nil {
			return fmt.Errorf("warned event: %w", err)
		}
		return nil
	})
}

func wouldVerb(e guard.Effect) string {
	if e == guard.EffectHold {
		return "have been held for approval"
	}
	return "have been denied"
}
