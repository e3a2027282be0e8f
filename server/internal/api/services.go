package api

import guardv1 "github.com/clawguard/clawguard/proto/guard/v1"

// GuardService implements guard.v1.Guard (methods in guard*.go).
type GuardService struct {
	guardv1.UnimplementedGuardServer
	d *Deps
}

// NewGuardService builds the Guard service.
func NewGuardService(d *Deps) *GuardService { return &GuardService{d: d} }

// ApprovalsService implements guard.v1.Approvals (methods in approvals*.go).
type ApprovalsService struct {
	guardv1.UnimplementedApprovalsServer
	d *Deps
}

// NewApprovalsService builds the Approvals service.
func NewApprovalsService(d *Deps) *ApprovalsService { return &ApprovalsService{d: d} }

// RegistryService implements guard.v1.Registry: runner RPCs in
// registry_runners.go, admin resources in registry_*.go.
type RegistryService struct {
	guardv1.UnimplementedRegistryServer
	d *Deps
}

// NewRegistryService builds the Registry service.
func NewRegistryService(d *Deps) *RegistryService { return &RegistryService{d: d} }
