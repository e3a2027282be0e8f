package netconnect

import (
	"fmt"

	"github.com/clawguard/clawguard/proto/egressrule"
	"github.com/clawguard/clawguard/server/internal/guard"
)

// explain says which rule answered and what would change the answer.
func explain(in *guard.Input, f guard.Facts, d guard.Decision) guard.Explained {
	group, ok := in.AgentGroup()
	if !ok {
		return guard.Explained{Checks: []guard.Check{{Name: "agent actor", Outcome: "deny",
			Detail: "only an agent's session opens connections; the actor is " + guard.ActorInWords(in.Actor)}}}
	}
	host, port, err := destination(in)
	if err != nil {
		return guard.Explained{Checks: []guard.Check{{Name: "destination", Outcome: "deny", Detail: err.Error()}}}
	}
	rs, err := rules(f)
	if err != nil {
		return guard.Explained{Checks: []guard.Check{{Name: "egress rules", Facts: []string{"egress_rules"}, Outcome: "deny", Detail: err.Error()}}}
	}
	dest := egressrule.Destination(host, port)
	a := egressrule.Decide(rs, f.Str("egress_default"), host, port)
	var x guard.Explained
	detail := "no egress rule names " + dest + ": the built-in default, hold"
	switch {
	case a.Rule != nil:
		detail = fmt.Sprintf("egress rule %s says %s (of the rules naming %s the most restrictive answers)", a.Rule.Describe(), a.Effect, dest)
	case a.Default:
		detail = fmt.Sprintf("no egress rule names %s: the group's default, %s", dest, a.Effect)
	}
	x.Checks = []guard.Check{{Name: "egress rule", Facts: []string{"egress_rules", "egress_default"}, Outcome: a.Effect, Detail: detail}}
	x.Summary = fmt.Sprintf("%s: connection to %s", verbed(d.Effect), dest)
	set := fmt.Sprintf("ncl egress set --group %s --host %s", group, egressrule.Destination(host, port))
	if a.Rule != nil && a.Rule.Port == 0 && (port == 443 || port == 80) {
		set = fmt.Sprintf("ncl egress set --group %s --host %s", group, host)
	}
	for _, e := range []string{egressrule.EffectAllow, egressrule.EffectHold, egressrule.EffectDeny} {
		if e != a.Effect {
			x.WouldChange = append(x.WouldChange, fmt.Sprintf("%s --effect %s → %s (unless a more restrictive rule also names it)", set, e, e))
		}
	}
	return x
}

func verbed(e guard.Effect) string {
	switch e {
	case guard.EffectAllow:
		return "allowed"
	case guard.EffectDeny:
		return "denied"
	}
	return "held"
}
