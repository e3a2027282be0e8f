// Package netconnect registers the net.connect catalog entry: an agent's
// new outbound connection, which the runner's egress proxy opens only after
// this decision. The decided resource is the destination {host, port}; the
// group's egress rules and default decide it (proto/egressrule), both read
// from the group's config row, so decisions are served from the snapshot.
// A hold is for the group's admin chain; its approval is used by the
// session's next connection to the same destination (nothing is replayed),
// or, approved for a session or N hours, becomes a standing grant.
package netconnect

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/clawguard/clawguard/proto/egressrule"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/commands"
	"github.com/clawguard/clawguard/server/internal/guard"
)

// Action is the catalog action; ApprovalAction the hold kind of its grants.
const (
	Action         = egressrule.CatalogAction
	ApprovalAction = egressrule.ApprovalKind
)

// configFact reads one column of the actor group's config row.
func configFact(column, name string) guard.Fact {
	return guard.Lookup{Table: "container_configs", Key: []guard.KeyEq{{Column: "agent_group_id", Equals: guard.ActorGroup}},
		Column: column}.Fact(name)
}

// Entry is the net.connect catalog entry.
func Entry() guard.Entry {
	return guard.Entry{
		Action:         Action,
		ApprovalAction: ApprovalAction,
		Description:    "an agent opens a connection out of its container (resource host and port); the group's egress rules decide",
		// Every fact is the actor's own group's row: nothing of another
		// group is read.
		Names: func(*guard.Input) []guard.Ref { return []guard.Ref{} },
		Facts: []guard.Fact{
			commands.GroupExistsFact,
			configFact("egress_rules", "egress_rules"),
			configFact("egress_default", "egress_default"),
		},
		Precheck: precheck,
		Baseline: baseline,
		Explain:  explain,
		// The engine binds the grant to the decided resource; the held
		// payload must name the same destination.
		GrantMatches: func(g *guard.GrantRow, in *guard.Input) bool {
			h, _ := g.Payload[egressrule.KeyHost].(string)
			p, _ := g.Payload[egressrule.KeyPort].(string)
			return h == in.Resource[egressrule.KeyHost] && p == in.Resource[egressrule.KeyPort]
		},
		TraceArgs:       []string{egressrule.KeyHost, egressrule.KeyPort},
		NextRequestUses: true,
	}
}

// Register adds the entry.
func Register(cat *guard.Catalog) error { return cat.Register(Entry()) }

// destination reads the decided resource: a normalised host and a port.
func destination(in *guard.Input) (host string, port int, err error) {
	host = in.Resource[egressrule.KeyHost]
	norm, err := egressrule.NormalizeHost(host)
	if err != nil {
		return "", 0, err
	}
	if norm != host {
		return "", 0, fmt.Errorf("host %q is not normalised (%q)", host, norm)
	}
	port, err = egressrule.ParsePort(in.Resource[egressrule.KeyPort])
	return host, port, err
}

// precheck refuses a malformed destination before any hold, and a payload
// that names another destination than the decided one.
func precheck(in *guard.Input, f guard.Facts) error {
	if _, ok := in.AgentGroup(); ok && !f.Bool("group_exists") {
		return errors.New("net_connect failed: agent group not found.")
	}
	if _, _, err := destination(in); err != nil {
		return fmt.Errorf("net_connect failed: %v.", err)
	}
	// The payload, when it names a destination (the runner's always does,
	// and a grant is bound to it), names the decided one; a dry run's may
	// be empty.
	for _, k := range []string{egressrule.KeyHost, egressrule.KeyPort} {
		if v, ok := in.Payload[k]; ok && v != in.Resource[k] {
			return errors.New("net_connect failed: the payload names another destination than the decided resource.")
		}
	}
	return nil
}

// rules reads the group's rules; rules a writer never stores fail closed
// (a decision on rules that do not parse denies).
func rules(f guard.Facts) ([]egressrule.Rule, error) {
	s := f.Str("egress_rules")
	if s == "" {
		return nil, nil
	}
	var out []egressrule.Rule
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("the group's egress rules do not parse: %w", err)
	}
	return out, nil
}

func baseline(in *guard.Input, f guard.Facts) (guard.Decision, error) {
	group, ok := in.AgentGroup()
	if !ok {
		return guard.Deny("an outbound connection comes only from an agent's session"), nil
	}
	host, port, err := destination(in)
	if err != nil {
		return guard.Decision{}, err
	}
	rs, err := rules(f)
	if err != nil {
		return guard.Decision{}, err
	}
	a := egressrule.Decide(rs, f.Str("egress_default"), host, port)
	dest := egressrule.Destination(host, port)
	why := source(a)
	switch a.Effect {
	case egressrule.EffectAllow:
		return guard.Allow(fmt.Sprintf("connection to %s is allowed (%s)", dest, why)), nil
	case egressrule.EffectDeny:
		// The operator's deny is a gate: audit and warn modes relax it.
		d := guard.Denyf("connection to %s is denied (%s)", dest, why)
		d.Gate = true
		return d, nil
	}
	return guard.Hold(guard.AdminsOfScope(group, ""), guardv1.ApproverScope_APPROVER_SCOPE_GROUP,
		fmt.Sprintf("connection to %s needs approval (%s)", dest, why)), nil
}

// source says where an answer came from, in words.
func source(a egressrule.Answer) string {
	switch {
	case a.Rule != nil:
		return "egress rule " + a.Rule.Describe()
	case a.Default:
		return "the group's egress default"
	}
	return "no egress rule names it; the default is hold"
}
