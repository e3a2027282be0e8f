package selfmod

import "github.com/clawguard/clawguard/server/internal/guard"

// explain: from the container path, self-modification always holds for the
// group's admins (the prechecks have already refused malformed requests).
func explain(in *guard.Input, _ guard.Facts, d guard.Decision) guard.Explained {
	group, ok := in.AgentGroup()
	if !ok {
		return guard.Explained{Checks: []guard.Check{{Name: "agent actor", Outcome: "deny",
			Detail: "self-modification comes only from an agent's container; the actor is " + guard.ActorInWords(in.Actor)}}}
	}
	return guard.Explained{
		Checks: []guard.Check{
			{Name: "precheck", Outcome: "pass", Detail: "the request is well-formed"},
			{Name: "self-modification", Outcome: string(d.Effect), Detail: "changing its own image or tools always needs an admin of " + group},
		},
		WouldChange: []string{"an approval by an admin of " + group + " (or a global admin or owner) → the approved change, exactly, once"},
	}
}
