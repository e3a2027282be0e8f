package guard

import (
	"strings"
	"testing"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// The freeze rule on its own: which scope denies, in what words, for whom.
func TestFreezeRule(t *testing.T) {
	host := &guardv1.Actor{Kind: &guardv1.Actor_Host{Host: &guardv1.HostActor{}}}
	cases := []struct {
		name   string
		actor  *guardv1.Actor
		facts  map[string]string
		frozen bool
		reason string
	}{
		{"nothing frozen", agent, map[string]string{}, false, ""},
		{"every agent", agent, map[string]string{"frozen_all": "telegram:olga"}, true,
			"frozen: every agent is frozen by telegram:olga (ncl unfreeze lifts it)"},
		{"the group", agent, map[string]string{"frozen_group": "operator"}, true,
			"frozen: this agent's group is frozen by operator (ncl unfreeze lifts it)"},
		{"the runner", agent, map[string]string{"frozen_runner": "telegram:dana"}, true,
			"frozen: this agent's runner is frozen by telegram:dana (ncl unfreeze lifts it)"},
		{"all names first", agent, map[string]string{"frozen_runner": "b", "frozen_group": "c", "frozen_all": "a"}, true,
			"frozen: every agent is frozen by a (ncl unfreeze lifts it)"},
		{"group before runner", agent, map[string]string{"frozen_runner": "b", "frozen_group": "c"}, true,
			"frozen: this agent's group is frozen by c (ncl unfreeze lifts it)"},
		{"not an agent", host, map[string]string{"frozen_all": "a"}, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, ok := frozen(&Input{Action: "t.x", Actor: c.actor}, NewFacts(c.facts))
			if ok != c.frozen || d.Reason != c.reason {
				t.Fatalf("frozen = %v %q, want %v %q", ok, d.Reason, c.frozen, c.reason)
			}
			if ok && (d.Effect != EffectDeny || d.DecidedBy != ByFreeze) {
				t.Fatalf("a freeze answers %s by %s, want deny by %s", d.Effect, d.DecidedBy, ByFreeze)
			}
		})
	}
}

// The SQL form names each scope of freezeScopes with the agent's key of it.
func TestFreezeCoversSQL(t *testing.T) {
	got := FreezeCovers("f.scope", "f.target", "s.agent_group_id", "s.runner_id")
	want := "(f.scope = 'all' OR (f.scope = 'group' AND f.target = s.agent_group_id) OR (f.scope = 'runner' AND f.target = s.runner_id))"
	if got != want {
		t.Fatalf("FreezeCovers =\n %s\nwant\n %s", got, want)
	}
	// Every scope the guard reads as a fact is in the SQL, and every fact
	// is refused as an entry's own.
	for _, f := range freezeFacts() {
		if !isFreezeFact(f.Name) || f.Lookup == nil || f.Lookup.Table != "freezes" {
			t.Fatalf("fact %s is not a freezes lookup", f.Name)
		}
		scope := strings.TrimPrefix(f.Name, "frozen_")
		if !strings.Contains(got, "'"+scope+"'") {
			t.Fatalf("scope %s of fact %s is not in the SQL rule", scope, f.Name)
		}
	}
}
