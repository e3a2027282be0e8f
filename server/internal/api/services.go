package api

import (
	"sync/atomic"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/admission"
)

// GuardService implements guard.v1.Guard (methods in guard*.go).
type GuardService struct {
	guardv1.UnimplementedGuardServer
	d         GuardDeps
	admission atomic.Pointer[admission.Limiter]
}

// NewGuardService builds the Guard service.
func NewGuardService(d GuardDeps) *GuardService {
	s := &GuardService{d: d}
	s.admission.Store(d.Admission)
	return s
}

// SetAdmission replaces the admission limiter (nil = off) while serving;
// tests swap in a full one.
func (s *GuardService) SetAdmission(l *admission.Limiter) { s.admission.Store(l) }

// ApprovalsService implements guard.v1.Approvals (methods in approvals*.go).
type ApprovalsService struct {
	guardv1.UnimplementedApprovalsServer
	d ApprovalsDeps
}

// NewApprovalsService builds the Approvals service.
func NewApprovalsService(d ApprovalsDeps) *ApprovalsService { return &ApprovalsService{d: d} }

// RegistryService implements guard.v1.Registry: runner RPCs in
// registry_runners.go, admin resources in registry_*.go.
type RegistryService struct {
	guardv1.UnimplementedRegistryServer
	d RegistryDeps
}

// NewRegistryService builds the Registry service.
func NewRegistryService(d RegistryDeps) *RegistryService { return &RegistryService{d: d} }
