package api

import (
	"context"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Sessions: list, get, history (resources/sessions.go).

func (s *RegistryService) ListSessions(ctx context.Context, req *guardv1.ListSessionsRequest) (*guardv1.ListSessionsResponse, error) {
	return s.d.Resources.ListSessions(ctx, req)
}

func (s *RegistryService) GetSession(ctx context.Context, req *guardv1.GetSessionRequest) (*guardv1.GetSessionResponse, error) {
	return s.d.Resources.GetSession(ctx, req)
}

func (s *RegistryService) GetSessionHistory(ctx context.Context, req *guardv1.GetSessionHistoryRequest) (*guardv1.GetSessionHistoryResponse, error) {
	return s.d.Resources.GetSessionHistory(ctx, req)
}
