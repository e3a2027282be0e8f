package api

import (
	"context"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/guard"
)

// The decision log (resources/decisions.go).

func (s *RegistryService) ListDecisions(ctx context.Context, req *guardv1.ListDecisionsRequest) (*guardv1.ListDecisionsResponse, error) {
	return s.d.Resources.ListDecisions(ctx, req)
}

// GetDecision returns one logged decision with its explanation: the same
// words the console's "why" page and `ncl explain` show (guard.Explain).
func (s *RegistryService) GetDecision(ctx context.Context, req *guardv1.GetDecisionRequest) (*guardv1.GetDecisionResponse, error) {
	d, trace, err := s.d.Resources.GetDecision(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	if s.d.Catalog != nil {
		d.Explanation = ExplainRecord(s.d.Catalog, d, trace)
	}
	return &guardv1.GetDecisionResponse{Decision: d}, nil
}

// ExplainRecord explains a logged decision from its trace.
func ExplainRecord(cat *guard.Catalog, d *guardv1.DecisionRecord, trace []byte) *guardv1.Explanation {
	return cat.ExplainLogged(guard.Logged{
		Action: d.GetAction(), Actor: d.GetActor(), Effect: guard.Effect(enumword.String(d.GetEffect())),
		Reason: d.GetReason(), DecidedBy: d.GetDecidedBy(), Grant: d.GetGrant(), Trace: trace,
	})
}
