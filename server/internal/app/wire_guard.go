package app

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	"github.com/clawguard/clawguard/server/internal/fault"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/server/internal/a2a"
	"github.com/clawguard/clawguard/server/internal/admission"
	"github.com/clawguard/clawguard/server/internal/agents"
	"github.com/clawguard/clawguard/server/internal/api"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/commands"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/mcpcalls"
	"github.com/clawguard/clawguard/server/internal/modelcalls"
	"github.com/clawguard/clawguard/server/internal/netconnect"
	"github.com/clawguard/clawguard/server/internal/permissions"
	"github.com/clawguard/clawguard/server/internal/pushes"
	"github.com/clawguard/clawguard/server/internal/resources"
	"github.com/clawguard/clawguard/server/internal/rpcdecl"
	"github.com/clawguard/clawguard/server/internal/selfmod"
	"github.com/clawguard/clawguard/server/internal/snapshot"
)

// Guard: the catalog (every domain registers its entries; the admin RPCs'
// entries come from their rule options), the engine with its batched
// decision log, holds through approvals, and the admin-RPC interceptor
// whose held calls are replayed on approval.
func wireGuard(ctx context.Context, d *Parts, s *services) error {
	cat, err := BuildCatalog()
	if err != nil {
		return err
	}
	// The log's own connections: plain decisions commit on them without
	// waiting for the disk when --decision-log-commit=async.
	logPool, err := d.Store.OpenLogPool(ctx, d.Config.GuardPipelines+1, d.Config.DecisionLogCommit == "async")
	if err != nil {
		return err
	}
	s.shutdown = append(s.shutdown, logPool.Close) // after eng.Close, appended below: shutdown runs in reverse
	d.Pools.Add("decision_log", logPool)
	var snap guard.Snapshot
	if d.Config.FactSnapshot {
		d.Snapshot = snapshot.New(d.Store.Pool, cat.Tables(), snapshot.Options{
			Log:          d.Log.With("component", "snapshot"),
			OnRefresh:    d.Metrics.ObserveSnapshotRefresh,
			OnError:      func(error) { d.Metrics.SnapshotRefreshErrorsTotal.Inc() },
			OnUnmirrored: func(n int) { d.Metrics.SnapshotTablesUnmirrored.Set(float64(n)) },
		})
		snap = d.Snapshot
		s.background = append(s.background, func(ctx context.Context) error { d.Snapshot.Run(ctx); return nil })
	}
	var standing guard.StandingFinder
	if d.Config.StandingGrantMax > 0 {
		standing = standingFinder(d.Approvals)
	}
	eng := guard.NewEngine(cat, d.Store.Pool, guard.Options{
		Log:          d.Log.With("component", "guard"),
		Observe:      d.Metrics.ObserveDecision,
		ObserveQuery: d.Metrics.ObserveQuery,
		ObserveMode:  d.Metrics.ObserveMode,
		Warn:         d.Approvals.NotifyWarning,
		Holds:        holdCreator(d.Approvals),
		HoldReach:    holdReach(d.Approvals),
		Standing:     standing,
		Approved:     approvedFinder,
		ConsumeHold:  approvals.Consume,
		// One pipelined round trip carries the facts reads and log
		// rows of many concurrent decisions (see BENCHMARKS.md).
		Batchers:        d.Config.GuardPipelines,
		Yield:           true,
		LogPool:         logPool,
		Snapshot:        snap,
		ObserveSnapshot: d.Metrics.ObserveSnapshotDecision,
		ObserveBatch:    d.Metrics.ObserveLogBatch,
	})
	d.Metrics.PreInit(cat.Actions(), approvals.HoldKinds(cat.ApprovalKinds()))
	d.Guard = eng
	if t := d.Config.AdmissionTarget; t > 0 {
		// Shed load past what answers within the target (see admission).
		d.Admission = admission.New(admission.Options{Target: t, Max: d.Config.AdmissionMaxInFlight, MaxRetryAfter: d.Config.AdmissionMaxRetryAfter})
		lim, _ := d.Admission.Limit()
		d.Metrics.AdmissionLimit.Set(float64(lim))
	}

	s.shutdown = append(s.shutdown, eng.Close)
	return nil
}

// wireAdminGuard adds the interceptor that consults the guard for every
// admin RPC, after the handlers' own request checks (the resources'
// Precheck), and replays approved cli_command holds.
func wireAdminGuard(d *Parts, s *services) {
	pool := d.Store.Pool
	admin := api.NewAdminGuard(api.AdminGuardDeps{Engine: d.Guard, Log: d.Log, Precheck: d.Resources.Precheck,
		CLIScope: func(ctx context.Context, group string) (string, error) { return resources.CLIScope(ctx, pool, group) },
		GroupID:  func(ctx context.Context, ref string) (string, error) { return resources.GroupID(ctx, pool, ref) },
		Notify: func(ctx context.Context, session string, n *guardv1.NotifyAgent) error {
			return pushes.Notify(ctx, pool, session, n)
		},
	}, s.invoke)
	s.chain.Unary = append(s.chain.Unary, admin.Unary)
	s.chain.Stream = append(s.chain.Stream, admin.Stream)
	d.Approvals.OnApproved(commands.ApprovalAction, admin.Replay)
}

// BuildCatalog registers every domain's entries and checks that every admin
// RPC's declared action exists (refusing to start otherwise).
func BuildCatalog() (*guard.Catalog, error) {
	cat := guard.NewCatalog()
	for _, register := range []func(*guard.Catalog) error{
		commands.Register, agents.Register, a2a.Register, selfmod.Register, permissions.Register, mcpcalls.Register, netconnect.Register, modelcalls.Register,
	} {
		if err := register(cat); err != nil {
			return nil, fmt.Errorf("refusing to start: %w", err)
		}
	}
	if missing := MissingActions(cat); len(missing) > 0 {
		return nil, fmt.Errorf("refusing to start: admin RPCs name catalog actions that do not exist: %s", strings.Join(missing, ", "))
	}
	return cat, nil
}

// MissingActions lists admin RPCs whose declared action has no catalog entry.
func MissingActions(cat *guard.Catalog) []string {
	var missing []string
	for _, m := range rpcdecl.AdminMethods(rpcdecl.Services...) {
		if _, ok := cat.Lookup(m.Rule.GetAction()); !ok {
			missing = append(missing, m.FullMethod+" → "+m.Rule.GetAction())
		}
	}
	return missing
}

func holdCreator(svc *approvals.Service) guard.HoldCreator {
	return func(ctx context.Context, tx pgx.Tx, hr guard.HoldRequest) (guard.HoldResult, error) {
		req := createRequest(hr)
		if hr.BeforeEvent != nil {
			req.BeforeEvent = func(ctx context.Context, b *pgx.Batch, res approvals.CreateResult) error {
				return hr.BeforeEvent(ctx, b, holdResult(res))
			}
		}
		res, err := svc.CreateHoldTx(ctx, tx, req)
		if err != nil {
			return guard.HoldResult{}, err
		}
		return holdResult(res), nil
	}
}

// holdReach asks the approvals service whether a dry run's hold could be made.
func holdReach(svc *approvals.Service) guard.HoldReach {
	return func(ctx context.Context, tx pgx.Tx, hr guard.HoldRequest) (string, error) {
		return svc.ReachableTx(ctx, tx, createRequest(hr))
	}
}

// createRequest is the hold a decision asks for, as the approvals service takes it.
func createRequest(hr guard.HoldRequest) approvals.CreateRequest {
	c := hr.Card
	req := approvals.CreateRequest{
		Kind: hr.Kind, CatalogAction: hr.CatalogAction, Payload: hr.Payload, Resource: hr.Resource,
		SessionID: hr.SessionID, AgentGroupID: hr.AgentGroupID, Requester: hr.Requester,
		Rule: hr.Rule, Scope: hr.Scope,
		Title: c.GetTitle(), Question: c.GetQuestion(), Options: c.GetOptions(), DedupKey: c.GetDedupKey(),
		OriginChannel: c.GetOriginChannelType(), RecordDeliveredTo: c.GetRecordDeliveredTo(),
		DeliveryAction: c.GetDeliveryAction(), Approvals: hr.Approvals,
	}
	if c.GetExpiresAt() != nil {
		req.ExpiresAt = c.GetExpiresAt().AsTime()
	}
	return req
}

// standingFinder asks the approvals service for a live standing grant
// matching the hold a decision is about to create.
func standingFinder(svc *approvals.Service) guard.StandingFinder {
	return func(ctx context.Context, tx pgx.Tx, hr guard.HoldRequest) (*guard.StandingUse, error) {
		u, err := svc.UseStandingTx(ctx, tx, approvals.StandingQuery{
			Kind: hr.Kind, CatalogAction: hr.CatalogAction, AgentGroupID: hr.AgentGroupID, SessionID: hr.SessionID,
			RequesterGroupID: hr.Requester.GetAgent().GetAgentGroupId(), Resource: hr.Resource,
			Rule: hr.Rule, Scope: hr.Scope, Payload: hr.Payload.AsMap(), Approvals: hr.Approvals,
		})
		if err != nil || u == nil {
			return nil, err
		}
		return &guard.StandingUse{ID: u.ID, HoldID: u.HoldID, ApprovedBy: u.ApprovedBy, Until: u.Until}, nil
	}
}

// approvedFinder asks the approvals service for an approval left for the
// next request of an entry marked NextRequestUses.
func approvedFinder(ctx context.Context, tx pgx.Tx, hr guard.HoldRequest) (string, []string, error) {
	return approvals.FindApprovedTx(ctx, tx, approvals.NextUse{
		Kind: hr.Kind, CatalogAction: hr.CatalogAction, SessionID: hr.SessionID, Resource: hr.Resource,
		Payload: hr.Payload.AsMap(), Rule: hr.Rule, Scope: hr.Scope,
	})
}

func holdResult(res approvals.CreateResult) guard.HoldResult {
	return guard.HoldResult{HoldID: res.Hold.GetId(), Created: res.Created, Undelivered: res.Undelivered,
		NoApprover: res.NoApprover, Reason: res.Reason, Approvers: res.Approvers}
}

// invoke calls an RPC's handler in-process by reflection on the service
// implementation (the approved-command replay; the guard already ran).
func (s *services) invoke(ctx context.Context, fullMethod string, req proto.Message) (any, error) {
	svc, method, ok := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	if !ok {
		return nil, fault.New(fault.Invalid, "bad method %q", fullMethod)
	}
	var impl any
	switch svc {
	case "guard.v1.Registry":
		impl = s.registry
	case "guard.v1.Approvals":
		impl = s.approvals
	case "guard.v1.Guard":
		impl = s.guard
	}
	m := reflect.ValueOf(impl).MethodByName(method)
	if impl == nil || !m.IsValid() || m.Type().NumIn() != 2 || m.Type().NumOut() != 2 {
		return nil, fault.New(fault.Unimplemented, "%s cannot be replayed", fullMethod)
	}
	out := m.Call([]reflect.Value{reflect.ValueOf(ctx), reflect.ValueOf(req)})
	err, _ := out[1].Interface().(error)
	return out[0].Interface(), err
}
