package metering

import (
	"context"
	"fmt"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/fault"
	"github.com/clawguard/clawguard/server/internal/store"
)

// Route is where a session's model calls of a kind go: its group's provider
// of that kind ("" when it has none), with the credential — the one answer
// that carries it, to the runner the session is placed on alone (the RPC
// reveals_secrets; an agent's assertion gets it redacted) — and whether
// the group has a budget (its calls reserve first; others are recorded by
// their settle). Another runner's session and a session that does not
// exist read alike.
func (s *Service) Route(ctx context.Context, runnerID string, req *guardv1.GetModelRouteRequest) (_ *guardv1.GetModelRouteResponse, err error) {
	defer store.Faulted(&err, "model route")
	kind, err := enumword.Word(req.GetKind())
	if err != nil || kind == "" {
		return nil, fault.InvalidField("kind", "anthropic or openai")
	}
	if req.GetSessionId() == "" {
		return nil, fault.InvalidField("session_id", "required")
	}
	var (
		owner string
		out   guardv1.GetModelRouteResponse
	)
	err = s.pool.QueryRow(ctx, `SELECT COALESCE(s.runner_id, ''), COALESCE(p.name, ''), COALESCE(p.base_url, ''), COALESCE(p.credential, ''),
			EXISTS (SELECT 1 FROM model_budgets b WHERE b.agent_group_id = s.agent_group_id)
		FROM sessions s
		LEFT JOIN container_configs c ON c.agent_group_id = s.agent_group_id
		LEFT JOIN model_providers p ON p.name = ANY (c.model_providers) AND p.kind = $2
		WHERE s.id = $1 ORDER BY p.name LIMIT 1`, req.GetSessionId(), kind).Scan(&owner, &out.Provider, &out.BaseUrl, &out.Credential, &out.HasBudget)
	if store.IsNoRows(err) || (err == nil && owner != runnerID) {
		return nil, notHosted(runnerID, req.GetSessionId())
	}
	if err != nil {
		return nil, fmt.Errorf("read the model route of %s: %w", req.GetSessionId(), err)
	}
	return &out, nil
}

func notHosted(runnerID, sessionID string) error {
	return fault.New(fault.Denied, "session %q is not hosted by runner %q", sessionID, runnerID)
}
