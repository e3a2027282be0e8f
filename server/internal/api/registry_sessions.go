package api

import (
	"context"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Sessions: list, get, history (resources/sessions.go).

func (s *RegistryService) ListSessions(ctx context.Context, req *guardv1.ListSessionsRequest) (*guardv1.ListSessionsResponse, error) {
	resp, err := s.d.Resources.ListSessions(ctx, req)
	return resp, DBError("sessions", err)
}

func (s *RegistryService) GetSession(ctx context.Context, req *guardv1.GetSessionRequest) (*guardv1.GetSessionResponse, error) {
	resp, err := s.d.Resources.GetSession(ctx, req)
	return resp, DBError("session", err)
}

func (s *RegistryService) GetSessionHistory(ctx context.Context, req *guardv1.GetSessionHistoryRequest) (*guardv1.GetSessionHistoryResponse, error) {
	resp, err := s.d.Resources.GetSessionHistory(ctx, req)
	return resp, DBError("session", err)
}
