package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/clawguard/clawguard/server/internal/store"

	"github.com/clawguard/clawguard/server/internal/fault"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/placement"
	"github.com/clawguard/clawguard/server/internal/sessions"
)

// Register checks a runner's manifest and grants (or renews) its lease.
// tokenRunnerID is the runner id the caller's token is bound to and
// tokenPlacement the host and labels the operator put on it: the runner
// is placed by those, narrowed by what it declares, never widened.
func (s *Service) Register(ctx context.Context, tokenRunnerID string, tokenPlacement placement.Identity, req *guardv1.RegisterRunnerRequest) (_ *guardv1.RegisterRunnerResponse, err error) {
	defer store.Faulted(&err, "runner")
	switch {
	case req.GetRunnerId() == "":
		return nil, fault.New(fault.Invalid, "runner_id: required")
	case req.GetInstanceId() == "":
		return nil, fault.New(fault.Invalid, "instance_id: required (random per runner process)")
	case req.GetRunnerId() != tokenRunnerID:
		s.log.InfoContext(ctx, "runner registration refused: another runner's id", "token_runner", tokenRunnerID, "runner", req.GetRunnerId())
		return nil, fault.New(fault.Denied, "this token is bound to runner %q, not %q", tokenRunnerID, req.GetRunnerId())
	}
	declared := placement.Identity{Host: req.GetHost(), Labels: req.GetLabels()}
	id, ignored, err := placement.Narrow(tokenPlacement, declared)
	if err != nil {
		s.log.InfoContext(ctx, "runner registration refused: placement wider than its token",
			"runner", req.GetRunnerId(), "declared_host", declared.Host, "declared_labels", declared.Labels, "err", err)
		return nil, err
	}
	if ignored {
		s.log.WarnContext(ctx, "runner token carries no host or labels: the declared ones are ignored and only unpinned groups are placed on it (recreate the token with --host/--label)",
			"runner", req.GetRunnerId(), "declared_host", declared.Host, "declared_labels", declared.Labels)
	}
	if v := Violations(req.GetDeliveryActions(), s.catalog); len(v) > 0 {
		s.metrics.ConformanceRefusalsTotal.Inc()
		s.log.WarnContext(ctx, "runner refused: guard conformance failure", "runner", req.GetRunnerId(), "violations", v)
		return nil, conformanceError(v)
	}
	labels, err := json.Marshal(id.Labels)
	if err != nil {
		return nil, fmt.Errorf("encode labels: %w", err)
	}
	decls := make([]map[string]string, 0, len(req.GetDeliveryActions()))
	for _, a := range req.GetDeliveryActions() {
		decls = append(decls, map[string]string{"name": a.GetName(), "catalog_action": a.GetCatalogAction()})
	}
	actions, err := json.Marshal(decls)
	if err != nil {
		return nil, fmt.Errorf("encode delivery actions: %w", err)
	}
	caps := req.GetCapabilities()
	if caps == nil {
		caps = []string{}
	}
	// One upsert: a live lease held by another instance is not taken
	// over; the same instance re-registering, any instance after the lease
	// expired, or after the holder released it (instance_id ''), is. In the
	// same transaction, sessions the (possibly
	// narrower) identity no longer matches leave the runner.
	var (
		expires  time.Time
		unplaced []string
	)
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `
			INSERT INTO runners (id, host, version, capabilities, labels, delivery_actions, lease_expires_at, instance_id, registered_at, expired_at)
			VALUES ($1, $2, $3, $4, $5, $6, now() + $7::interval, $8, now(), NULL)
			ON CONFLICT (id) DO UPDATE SET host = EXCLUDED.host, version = EXCLUDED.version,
				capabilities = EXCLUDED.capabilities, labels = EXCLUDED.labels,
				delivery_actions = EXCLUDED.delivery_actions, lease_expires_at = EXCLUDED.lease_expires_at,
				instance_id = EXCLUDED.instance_id, registered_at = now(), expired_at = NULL
			WHERE runners.instance_id IN (EXCLUDED.instance_id, '') OR runners.lease_expires_at <= now()
			RETURNING lease_expires_at`,
			req.GetRunnerId(), id.Host, req.GetVersion(), caps, labels, actions,
			s.opts.LeaseTTL, req.GetInstanceId()).Scan(&expires)
		if err != nil {
			return err
		}
		unplaced, err = sessions.UnplaceTx(ctx, tx, "", req.GetRunnerId())
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fault.New(fault.Exists, "runner id %q is held by another live process (its lease has not expired)", req.GetRunnerId())
	}
	if err != nil {
		return nil, fmt.Errorf("register runner %s: %w", req.GetRunnerId(), err)
	}
	if len(unplaced) > 0 {
		s.log.InfoContext(ctx, "sessions left a runner whose placement narrowed", "runner", req.GetRunnerId(), "sessions", unplaced)
	}
	s.log.InfoContext(ctx, "runner registered", "runner", req.GetRunnerId(), "host", id.Host, "labels", id.Labels, "instance", req.GetInstanceId())
	s.hub.wake(req.GetRunnerId())
	return &guardv1.RegisterRunnerResponse{
		LeaseExpiresAt:    timestamppb.New(expires),
		HeartbeatInterval: durationpb.New(s.opts.HeartbeatInterval),
		LeaseTtl:          durationpb.New(s.opts.LeaseTTL),
		ExemptActions:     append([]string(nil), ExemptDeliveryActions...),
		Host:              id.Host,
		Labels:            id.Labels,
	}, nil
}

// conformanceError is FailedPrecondition listing every violation, in the
// message and as a ConformanceViolations detail.
func conformanceError(violations []string) error {
	return fault.WithDetails(fault.New(fault.Precondition, "guard conformance failure: %s", strings.Join(violations, "; ")),
		&guardv1.ConformanceViolations{Violations: violations})
}

// renew extends the lease of (runnerID, instanceID) if it is still live, or
// lapsed without a sweep having claimed its expiry yet (sessions move only
// after the claim, so the runner still holds them: e.g. its heartbeats could
// not reach the database). A lost lease (expiry claimed, or taken over) is
// FailedPrecondition: the runner must register again.
func (s *Service) renew(ctx context.Context, runnerID, instanceID string) (time.Time, error) {
	var expires time.Time
	err := s.pool.QueryRow(ctx, `
		UPDATE runners SET lease_expires_at = now() + $3::interval, expired_at = NULL
		WHERE id = $1 AND instance_id = $2 AND (lease_expires_at > now() OR expired_at IS NULL)
		RETURNING lease_expires_at`, runnerID, instanceID, s.opts.LeaseTTL).Scan(&expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, fault.New(fault.Precondition,
			"runner %q has no live lease for this instance (expired or taken over); register again", runnerID)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("renew lease of %s: %w", runnerID, err)
	}
	return expires, nil
}
