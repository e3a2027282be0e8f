package resources

import (
	"context"
	"fmt"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/config"
	"github.com/clawguard/clawguard/server/internal/store"
)

// Operator settings of catalog actions: the quorum their holds need and
// their enforcement mode (action_settings; the guard reads the mode live
// with every decision, approvals the quorum when a hold is created).

func validApprovals(field string, n int32) error {
	if n < 0 || n > config.MaxApprovals {
		return invalid(field, "%d: want 0 (the default) to %d", n, config.MaxApprovals)
	}
	return nil
}

// SetActionSettings sets a catalog action's quorum and enforcement mode. The
// action must be in the catalog (a setting for a name nobody decides would
// silently do nothing).
func (s *Service) SetActionSettings(ctx context.Context, req *guardv1.SetActionSettingsRequest) (_ *guardv1.SetActionSettingsResponse, err error) {
	defer store.Faulted(&err, "action settings")
	entry, err := s.checkSetActionSettings(req)
	if err != nil {
		return nil, err
	}
	mode, err := enumColumn("mode", req.GetMode())
	if err != nil {
		return nil, err
	}
	if mode == "" {
		mode = "enforce"
	}
	esc, err := checkEscalation(req.GetRemindAfter(), req.GetEscalateAfter(), req.GetEscalateTo())
	if err != nil {
		return nil, err
	}
	if esc.to, err = resolveApprovers(ctx, s.pool, esc.to); err != nil {
		return nil, err
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO action_settings (action, approvals, mode, step_up, remind_after_s, escalate_after_s, escalate_to)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (action) DO UPDATE SET approvals = EXCLUDED.approvals, mode = EXCLUDED.mode, step_up = EXCLUDED.step_up,
			remind_after_s = EXCLUDED.remind_after_s, escalate_after_s = EXCLUDED.escalate_after_s, escalate_to = EXCLUDED.escalate_to,
			updated_at = now()`,
		req.GetAction(), req.GetApprovals(), mode, req.GetStepUp(), esc.remindS, esc.escalateS, esc.to); err != nil {
		return nil, err
	}
	entry.RemindAfter, entry.EscalateAfter, entry.EscalateTo = seconds(esc.remindS), seconds(esc.escalateS), esc.to
	if entry.Mode, err = enumFromColumn[guardv1.EnforcementMode]("mode", mode); err != nil {
		return nil, err
	}
	entry.Approvals, entry.StepUp = req.GetApprovals(), req.GetStepUp()
	warn, err := quorumWarnings(ctx, s.pool, req.GetApprovals(), "", "catalog action "+req.GetAction())
	return &guardv1.SetActionSettingsResponse{Entry: entry, Warnings: warn}, err
}

func (s *Service) catalogEntry(action string) *guardv1.CatalogEntry {
	if s.catalog == nil {
		return nil
	}
	for _, e := range s.catalog.List() {
		if e.GetAction() == action {
			return e
		}
	}
	return nil
}

// withSettings fills the operator settings into catalog entries.
func (s *Service) withSettings(ctx context.Context, entries []*guardv1.CatalogEntry) error {
	rows, err := s.pool.Query(ctx, `SELECT action, approvals, mode, step_up, remind_after_s, escalate_after_s, escalate_to FROM action_settings`)
	if err != nil {
		return err
	}
	defer rows.Close()
	byAction := map[string]*guardv1.CatalogEntry{}
	for _, e := range entries {
		byAction[e.GetAction()] = e
	}
	for rows.Next() {
		var (
			action, mode string
			approvals    int32
			stepUp       bool
			esc          escalationSettings
		)
		if err := rows.Scan(&action, &approvals, &mode, &stepUp, &esc.remindS, &esc.escalateS, &esc.to); err != nil {
			return err
		}
		if e := byAction[action]; e != nil {
			e.StepUp = stepUp
			e.RemindAfter, e.EscalateAfter, e.EscalateTo = seconds(esc.remindS), seconds(esc.escalateS), esc.to
			if e.Mode, err = enumFromColumn[guardv1.EnforcementMode]("mode", mode); err != nil {
				return fmt.Errorf("action %s: %w", action, err)
			}
			e.Approvals = approvals
		}
	}
	return rows.Err()
}
