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
	if _, err := s.pool.Exec(ctx, `INSERT INTO action_settings (action, approvals, mode, step_up) VALUES ($1, $2, $3, $4)
		ON CONFLICT (action) DO UPDATE SET approvals = EXCLUDED.approvals, mode = EXCLUDED.mode, step_up = EXCLUDED.step_up, updated_at = now()`,
		req.GetAction(), req.GetApprovals(), mode, req.GetStepUp()); err != nil {
		return nil, err
	}
	if entry.Mode, err = enumFromColumn[guardv1.EnforcementMode]("mode", mode); err != nil {
		return nil, err
	}
	entry.Approvals, entry.StepUp = req.GetApprovals(), req.GetStepUp()
	return &guardv1.SetActionSettingsResponse{Entry: entry}, nil
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
	rows, err := s.pool.Query(ctx, `SELECT action, approvals, mode, step_up FROM action_settings`)
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
		)
		if err := rows.Scan(&action, &approvals, &mode, &stepUp); err != nil {
			return err
		}
		if e := byAction[action]; e != nil {
			e.StepUp = stepUp
			if e.Mode, err = enumFromColumn[guardv1.EnforcementMode]("mode", mode); err != nil {
				return fmt.Errorf("action %s: %w", action, err)
			}
			e.Approvals = approvals
		}
	}
	return rows.Err()
}
