package guard

import (
	"fmt"
	"strings"
)

// The freeze rule, in one place. An agent is frozen while a freezes row
// covers it: scope 'all' (target ''), its group, or the runner its session
// is on. A frozen agent's decisions deny before the precheck, in every
// mode and whatever grant they carry (frozen, in evaluate). The guard reads
// the three rows as facts by key (freezeFacts: the snapshot serves them);
// what else asks whether an agent is frozen — a hold's approval
// (approvals), a freeze's stop and an unfreeze's start of the agents in
// scope (resources) — asks the same question in SQL through FreezeCovers.
// The freezes table is resources' (freezes.go writes it).

// freezeScope is one scope a freeze covers an agent by.
type freezeScope struct {
	scope string // freezes.scope
	fact  string // the fact the guard reads the agent's row of it as
	words string // what is frozen, as the denial says it
	// target is the key of the agent's row (a lookup parameter); sqlTarget
	// picks the SQL expression that names it from the agent's group and
	// runner ("" for 'all', whose target is always '').
	target    Param
	sqlTarget func(group, runner string) string
}

// freezeScopes are the scopes, in the order a denial names them.
var freezeScopes = [...]freezeScope{
	{scope: "all", fact: "frozen_all", words: "every agent", target: Literal("")},
	{scope: "group", fact: "frozen_group", words: "this agent's group", target: ActorGroup,
		sqlTarget: func(group, _ string) string { return group }},
	{scope: "runner", fact: "frozen_runner", words: "this agent's runner", target: CallerRunner,
		sqlTarget: func(_, runner string) string { return runner }},
}

// freezeFacts are the facts every entry reads: who froze each scope of the
// agent (absent when it is not frozen), read by key from the freezes table.
func freezeFacts() []Fact {
	out := make([]Fact, 0, len(freezeScopes))
	for _, s := range freezeScopes {
		l := Lookup{Table: "freezes", Key: []KeyEq{{"scope", Literal(s.scope)}, {"target", s.target}}, Column: "frozen_by"}
		out = append(out, l.Fact(s.fact))
	}
	return out
}

// isFreezeFact: name is one of freezeFacts (an entry may not declare it).
func isFreezeFact(name string) bool {
	for _, s := range freezeScopes {
		if s.fact == name {
			return true
		}
	}
	return false
}

// frozen denies an agent's decision whose scope is frozen: before the
// precheck and the baseline, no mode relaxes it and no grant passes it.
// Only agents: the people who unfreeze must still be heard.
func frozen(in *Input, f Facts) (Decision, bool) {
	if _, agent := in.AgentGroup(); !agent {
		return Decision{}, false
	}
	for _, s := range freezeScopes {
		if f.Has(s.fact) {
			return Decision{Effect: EffectDeny, DecidedBy: ByFreeze,
				Reason: fmt.Sprintf("frozen: %s is frozen by %s (ncl unfreeze lifts it)", s.words, f.Str(s.fact))}, true
		}
	}
	return Decision{}, false
}

// FreezeCovers is the rule in SQL: the freezes row whose scope and target
// are the SQL expressions scope and target covers an agent of group on
// runner (SQL expressions too). A caller that reads who froze an agent
// selects the freezes rows it is true of; one that lists the agents of a
// freeze selects the sessions.
func FreezeCovers(scope, target, group, runner string) string {
	parts := make([]string, 0, len(freezeScopes))
	for _, s := range freezeScopes {
		p := scope + " = '" + s.scope + "'"
		if s.sqlTarget != nil {
			p = "(" + p + " AND " + target + " = " + s.sqlTarget(group, runner) + ")"
		}
		parts = append(parts, p)
	}
	return "(" + strings.Join(parts, " OR ") + ")"
}
