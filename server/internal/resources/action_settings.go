package resources

import (
	"context"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/config"
)

// Operator settings of catalog actions: the quorum their holds need and
// their enforcement mode (action_settings; the guard reads the mode live
// with every decision, approvals the quorum when a hold is created).

// ModeString is the stored name of a mode; UNSPECIFIED is "" (inherit).
func ModeString(m guardv1.EnforcementMode) string {
	switch m {
	case guardv1.EnforcementMode_ENFORCEMENT_MODE_ENFORCE:
		return "enforce"
	case guardv1.EnforcementMode_ENFORCEMENT_MODE_AUDIT:
		return "audit"
	case guardv1.EnforcementMode_ENFORCEMENT_MODE_WARN:
		return "warn"
	}
	return ""
}

// ModeFromString is the mode a stored name names ("" → UNSPECIFIED).
func ModeFromString(s string) guardv1.EnforcementMode {
	switch s {
	case "enforce":
		return guardv1.EnforcementMode_ENFORCEMENT_MODE_ENFORCE
	case "audit":
		return guardv1.EnforcementMode_ENFORCEMENT_MODE_AUDIT
	case "warn":
		return guardv1.EnforcementMode_ENFORCEMENT_MODE_WARN
	}
	return guardv1.EnforcementMode_ENFORCEMENT_MODE_UNSPECIFIED
}

func validMode(field string, m guardv1.EnforcementMode) error {
	if _, ok := guardv1.EnforcementMode_name[int32(m)]; !ok {
		return invalid(field, "unknown mode %d (want enforce, audit or warn)", m)
	}
	return nil
}

func validApprovals(field string, n int32) error {
	if n < 0 || n > config.MaxApprovals {
		return invalid(field, "%d: want 0 (the default) to %d", n, config.MaxApprovals)
	}
	return nil
}

// SetActionSettings sets a catalog action's quorum and enforcement mode. The
// action must be in the catalog (a setting for a name nobody decides would
// silently do nothing).
func (s *Service) SetActionSettings(ctx context.Context, req *guardv1.SetActionSettingsRequest) (*guardv1.SetActionSettingsResponse, error) {
	if err := required("action", req.GetAction()); err != nil {
		return nil, err
	}
	if err := validApprovals("approvals", req.GetApprovals()); err != nil {
		return nil, err
	}
	if err := validMode("mode", req.GetMode()); err != nil {
		return nil, err
	}
	entry := s.catalogEntry(req.GetAction())
	if entry == nil {
		return nil, invalid("action", "%q is not a catalog action (ncl catalog list)", req.GetAction())
	}
	mode := ModeString(req.GetMode())
	if mode == "" {
		mode = "enforce"
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO action_settings (action, approvals, mode) VALUES ($1, $2, $3)
		ON CONFLICT (action) DO UPDATE SET approvals = EXCLUDED.approvals, mode = EXCLUDED.mode, updated_at = now()`,
		req.GetAction(), req.GetApprovals(), mode); err != nil {
		return nil, err
	}
	entry.Approvals, entry.Mode = req.GetApprovals(), ModeFromString(mode)
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
	rows, err := s.pool.Query(ctx, `SELECT action, approvals, mode FROM action_settings`)
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
		)
		if err := rows.Scan(&action, &approvals, &mode); err != nil {
			return err
		}
		if e := byAction[action]; e != nil {
			e.Approvals, e.Mode = approvals, ModeFromString(mode)
		}
	}
	return rows.Err()
}
