package agents

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/clawguard/clawguard/server/internal/fault"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/registry"
	"github.com/clawguard/clawguard/server/internal/resources"
)

// MaxInstructions bounds create_agent's instructions (the runner's precheck
// says the same before a hold is made).
const MaxInstructions = 16 << 10

// Appliers are the domain's apply steps, handed to the registry at assembly:
// agents.create creates the group.
func Appliers() []registry.Applier {
	return []registry.Applier{{Action: Action, Apply: applyCreate}}
}

// applyCreate creates the group with its instructions (its agent starts
// with them), its container config (default cli_scope group) and the seed's
// bidirectional destinations: creator → new (named after it), new → creator
// ("parent").
func applyCreate(ctx context.Context, tx pgx.Tx, sess registry.Session, req *guardv1.ApplyActionRequest) (registry.Applied, error) {
	name := registry.PayloadString(req, "name")
	if name == "" {
		return registry.Applied{}, fault.New(fault.Invalid, "payload.name: required")
	}
	instructions := registry.PayloadString(req, "instructions")
	if len(instructions) > MaxInstructions {
		return registry.Applied{}, fault.New(fault.Invalid, "payload.instructions: longer than %d bytes", MaxInstructions)
	}
	// The approval was for this name: a taken one is refused, not renamed.
	id, _, err := resources.CreateGroupTx(ctx, tx, resources.NewGroup{Name: name, Instructions: instructions}, resources.RefuseTakenName)
	if err != nil {
		return registry.Applied{}, err
	}
	local, err := freeDestinationName(ctx, tx, sess.GroupID, normalizeName(name))
	if err != nil {
		return registry.Applied{}, err
	}
	if err := resources.LinkChildTx(ctx, tx, sess.GroupID, local, id); err != nil {
		return registry.Applied{}, err
	}
	return registry.Applied{
		Result:  map[string]any{"agent_group_id": id, "name": name, "destination": local, "instructions": instructions},
		Message: fmt.Sprintf("Agent %q created; message it as %q.", name, local),
	}, nil
}

var nonAlnum = regexp.MustCompile(`[^a-z0-9]+`)

// normalizeName is the seed's destination-name normalization.
func normalizeName(s string) string { return nonAlnum.ReplaceAllString(strings.ToLower(s), "-") }

// freeDestinationName is base, or base-2, base-3… when taken.
func freeDestinationName(ctx context.Context, tx pgx.Tx, groupID, base string) (string, error) {
	if base == "" || base == "-" {
		base = "agent"
	}
	for i := 1; i < 1000; i++ {
		name := base
		if i > 1 {
			name = fmt.Sprintf("%s-%d", base, i)
		}
		var taken bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM agent_destinations WHERE agent_group_id = $1 AND name = $2)`, groupID, name).Scan(&taken); err != nil {
			return "", fmt.Errorf("check destination name: %w", err)
		}
		if !taken {
			return name, nil
		}
	}
	return "", fault.New(fault.Exhausted, "no free destination name for %q", base)
}
