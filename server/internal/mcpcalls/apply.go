package mcpcalls

import (
	"context"
	"encoding/json"

	"github.com/clawguard/clawguard/server/internal/fault"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/mcpcall"
	"github.com/clawguard/clawguard/server/internal/registry"
)

// ClaimKey is the payload key the runner stamps on an approved call's
// ApplyAction: its claim on running the call. The hold records the first
// claim, so a runner that finds another claim recorded knows an earlier
// attempt (a process that died mid-call) may have run it, and does not run
// it a second time.
const ClaimKey = mcpcall.KeyClaim

// Appliers are the domain's apply steps: an approved call is applied once
// — the registry re-checks the baseline live (a server removed, a tool now
// denied: refused), binds the payload to the approved one and records the
// hold applied with the runner's claim — before the runner runs it.
func Appliers() []registry.Applier {
	return []registry.Applier{{
		Action:   Action,
		Apply:    applyCall,
		Resource: resource,
		Stamped:  []string{ClaimKey},
	}}
}

func applyCall(_ context.Context, _ pgx.Tx, _ registry.Session, req *guardv1.ApplyActionRequest) (registry.Applied, error) {
	claim := registry.PayloadString(req, ClaimKey)
	if claim == "" {
		return registry.Applied{}, fault.New(fault.Invalid, "payload.claim: required (the runner's claim on running the call)")
	}
	return registry.Applied{
		Result: map[string]any{ClaimKey: claim, mcpcall.KeyServer: registry.PayloadString(req, mcpcall.KeyServer),
			mcpcall.KeyTool: registry.PayloadString(req, mcpcall.KeyTool)},
		Message: "MCP tool call claimed; the runner runs it now.",
	}, nil
}

// resource is the decided resource: the payload's server, tool and digest.
// A request resource naming anything else is refused.
func resource(req *guardv1.ApplyActionRequest) (map[string]string, error) {
	b, err := req.GetPayload().MarshalJSON()
	if err != nil {
		return nil, fault.New(fault.Invalid, "payload: %v", err)
	}
	p := map[string]any{}
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fault.New(fault.Invalid, "payload: %v", err)
	}
	d, err := payloadDigest(p)
	if err != nil {
		return nil, fault.New(fault.Invalid, "payload: %v", err)
	}
	out := mcpcall.Resource(registry.PayloadString(req, mcpcall.KeyServer), registry.PayloadString(req, mcpcall.KeyTool), d)
	for k, v := range req.GetResource() {
		if out[k] != v {
			return nil, fault.New(fault.Invalid, "resource.%s %q is not the payload's %q", k, v, out[k])
		}
	}
	return out, nil
}
