package registry

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/clawguard/clawguard/server/internal/fault"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Applier is a domain's apply step for one catalog action: the domain that
// registers the action's catalog entry hands it to the registry at assembly
// (app), next to the entry. ApplyAction checks the citation, binds the
// payload and re-checks the baseline; the applier only mutates.
type Applier struct {
	// Action is the catalog action it applies.
	Action string
	// Apply makes the mutation in the applying transaction (the citation is
	// consumed in it too, so an error leaves the citation unused) and says
	// what it did: the result is recorded on a consumed hold.
	Apply func(ctx context.Context, tx pgx.Tx, sess Session, req *guardv1.ApplyActionRequest) (Applied, error)
	// Resource, when set, reads from the request the resource the action
	// is decided about (a2a.send: the target); an error refuses the request
	// before anything is applied, and the re-check decides about what it
	// returns (over the request's or the approved hold's resource).
	Resource func(req *guardv1.ApplyActionRequest) (map[string]string, error)
	// Stamped are payload keys the runner adds after approval (a2a.send:
	// the message id); binding ignores them unless the approved payload
	// has them.
	Stamped []string
	// AlwaysHeld says the guard holds the action for approval whatever the
	// baseline reads (self-modification): a grantless ALLOW for it is only
	// a relaxed mode's, and any other is refused.
	AlwaysHeld bool
}

// Session is the session an application acts for, and its group.
type Session struct{ ID, GroupID string }

// Applied is what an application did: its result and the message for the
// agent (recorded on a hold, so a repeated citation of its consuming
// decision answers the same).
type Applied struct {
	Result  map[string]any `json:"result"`
	Message string         `json:"message"`
}

// appliers indexes the apply steps by action, refusing an incomplete or
// duplicate one and one for an action the catalog does not know (a nil
// catalog knows nothing, as in conformance).
func appliers(list []Applier, catalog Catalog) (map[string]Applier, error) {
	out := make(map[string]Applier, len(list))
	for _, a := range list {
		switch _, dup := out[a.Action]; {
		case a.Action == "" || a.Apply == nil:
			return nil, fmt.Errorf("an apply step for %q has no action or no Apply", a.Action)
		case dup:
			return nil, fmt.Errorf("two apply steps for %q", a.Action)
		case catalog == nil || !catalog.Known(a.Action):
			return nil, fmt.Errorf("an apply step for %q, which is not a catalog action", a.Action)
		}
		out[a.Action] = a
	}
	return out, nil
}

// AppliedActions lists the catalog actions ApplyAction performs: exactly
// those a domain handed an apply step for.
func (s *Service) AppliedActions() []string {
	out := make([]string, 0, len(s.appliers))
	for a := range s.appliers {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}

// PayloadString is a string field of the applied payload, trimmed ("" when
// absent or not a string).
func PayloadString(req *guardv1.ApplyActionRequest, key string) string {
	if v, ok := req.GetPayload().GetFields()[key]; ok {
		return strings.TrimSpace(v.GetStringValue())
	}
	return ""
}

// PayloadStrings is an optional list-of-strings field of the applied
// payload (absent or null: none); anything else is InvalidArgument.
func PayloadStrings(req *guardv1.ApplyActionRequest, key string) ([]string, error) {
	v, ok := req.GetPayload().GetFields()[key]
	if !ok {
		return nil, nil
	}
	if _, null := v.GetKind().(*structpb.Value_NullValue); null {
		return nil, nil
	}
	list, isList := v.GetKind().(*structpb.Value_ListValue)
	if !isList {
		return nil, fault.New(fault.Invalid, "payload.%s: must be a list of strings", key)
	}
	var out []string
	for _, e := range list.ListValue.GetValues() {
		sv, ok := e.GetKind().(*structpb.Value_StringValue)
		if !ok {
			return nil, fault.New(fault.Invalid, "payload.%s: every entry must be a string", key)
		}
		out = append(out, sv.StringValue)
	}
	return out, nil
}
