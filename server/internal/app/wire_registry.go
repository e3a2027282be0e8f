package app

import (
	"context"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/store"

	"github.com/clawguard/clawguard/server/internal/a2a"
	"github.com/clawguard/clawguard/server/internal/agents"
	"github.com/clawguard/clawguard/server/internal/mcpcalls"
	"github.com/clawguard/clawguard/server/internal/registry"
	"github.com/clawguard/clawguard/server/internal/selfmod"
)

// Registry: runner registration (conformance against the guard's own
// catalog — the one Decide uses, so the two cannot disagree) and the lease
// sweep (every replica; conditional UPDATEs make them safe together).
// ApplyAction performs what the domains hand it apply steps for. Its push
// wake-ups ride the replica's listener (see buildServices).
func wireRegistry(d *Parts, s *services) error {
	cat := d.Guard.Catalog
	catalog := registry.CatalogFunc(func(action string) bool {
		_, ok := cat.Lookup(action)
		return ok
	})
	svc, err := registry.New(d.Store.Pool, d.Metrics, d.Log, registry.Options{
		Baseline:       d.Guard.Baseline,
		DecideTx:       tracedDecideTx(d.Guard.DecideTx, frameTracer(d)),
		LeaseTTL:       d.Config.LeaseTTL,
		CitationWindow: d.Config.CitationWindow,
		AckDeadline:    d.Config.PushAckDeadline,
		Appliers:       Appliers(),
	}, catalog)
	if err != nil {
		return err
	}
	d.Registry = svc
	s.background = append(s.background, svc.SweepLoop)
	return nil
}

// Appliers are the apply steps of the actions a runner applies, each from
// the domain that registers the action's catalog entry (BuildCatalog).
func Appliers() []registry.Applier {
	return slices.Concat(agents.Appliers(), a2a.Appliers(), selfmod.Appliers(), mcpcalls.Appliers())
}

// tracedDecideTx is decide with a span, as a DecideStream frame's: a
// replay decided in ApplyAction is in the held request's trace, under the
// runner's ApplyAction (nil tracer: decide as it is).
func tracedDecideTx(decide registry.DecideTx, tracer trace.Tracer) registry.DecideTx {
	if tracer == nil {
		return decide
	}
	return func(ctx context.Context, tx store.Querier, req *guard.Request) (*guardv1.DecideResponse, func(), error) {
		ctx, span := tracer.Start(ctx, "clawguard.guard/Decide", trace.WithAttributes(attribute.String("clawguard.action", req.Action),
			attribute.String("clawguard.session", req.Session()), attribute.String("clawguard.grant", req.Grant)))
		defer span.End()
		resp, after, err := decide(ctx, tx, req)
		if err != nil {
			span.SetStatus(otelcodes.Error, err.Error())
			return resp, after, err
		}
		span.SetAttributes(attribute.String("clawguard.effect", enumword.String(resp.GetDecision().GetEffect())),
			attribute.String("clawguard.decision_id", resp.GetDecisionId()))
		return resp, after, nil
	}
}
