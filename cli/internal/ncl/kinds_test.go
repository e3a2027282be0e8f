package ncl

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// everything is a document that lists one of every part the kinds know.
func everything() *state {
	return &state{APIVersion: stateVersion,
		Users:          []userSpec{{ID: "telegram:dana", Name: "Dana", OIDC: []oidcSpec{{Issuer: "https://id", Subject: "d"}}}},
		ModelProviders: []modelProviderSpec{{Name: "anthropic", Kind: "anthropic", BaseURL: "https://api"}},
		ModelPrices:    []modelPriceSpec{{Provider: "anthropic", Model: "m", InputMicros: 1}},
		Groups: []groupSpec{{Name: "research", CLIScope: "group", AptPackages: []string{"curl"},
			MCPServers:   []mcpServerSpec{{Name: "files", Command: "mcp-files", Tools: []mcpToolSpec{{Tool: "read", mcpSettingSpec: mcpSettingSpec{Effect: "allow"}}}}},
			AgentCommand: []string{"agent"}, Egress: &egressSpec{Rules: []egressRuleSpec{{Host: "example.com", Effect: "allow"}}},
			Models: &groupModelsSpec{Providers: []string{"anthropic"}}}},
		MessagingGroups: []messagingGroupSpec{{ChannelType: "telegram", PlatformID: "1"}},
		Members:         []memberSpec{{Group: "research", User: "telegram:dana"}},
		Destinations:    []destinationSpec{{Group: "research", Name: "ops", Target: "research"}},
		Policies:        []policySpec{{From: "research", To: "research", Approvers: []string{"telegram:dana"}}},
		Roles:           []roleSpec{{User: "telegram:dana", Role: "admin", Scope: "global"}},
		Catalog:         []actionSpec{{Action: "a2a.send", Mode: "audit"}},
		Wirings:         []wiringSpec{{Chat: "telegram/1", Group: "research"}},
	}
}

// Every part of the document is some kind's, and the kinds' order is the
// order of the changes: what names a user, a provider, a group or a chat
// comes after it; pruning goes the other way, providers last.
func TestKindsPlanEveryPartInOrder(t *testing.T) {
	empty := &state{APIVersion: stateVersion}
	made := []string{"user telegram:dana", "oidc sign-in of user", "model provider anthropic", "model price anthropic/m",
		"group research", "apt packages of group research", "mcp server files of group research", "mcp tool files.read",
		"group research: agent command", "egress rule of group research", "model providers of group research",
		"messaging group telegram/1", "member telegram:dana in research", "destination research/ops", "policy research → research",
		"role telegram:dana admin", "catalog a2a.send", "wiring telegram/1 → research"}
	changes, left := plan(empty, everything(), false)
	inOrder(t, "made", changes, made)
	if len(left) != 0 {
		t.Fatalf("left on a first apply: %v", left)
	}
	pruned := []string{"wiring telegram/1 → research", "catalog a2a.send settings", "role telegram:dana admin", "policy research → research",
		"destination research/ops", "member telegram:dana in research", "messaging group telegram/1",
		"group research (and everything", "oidc sign-in of user", "model price anthropic/m", "model provider anthropic"}
	dels, left := plan(everything(), &state{APIVersion: stateVersion, Users: []userSpec{{ID: "telegram:dana", Name: "Dana"}}}, true)
	inOrder(t, "pruned", dels, pruned)
	if len(left) != 0 {
		t.Fatalf("left with --prune: %v", left)
	}
	// A group's parts: an MCP server (its settings go with it) before the
	// group's egress rules, its packages last.
	bare := everything()
	bare.Groups[0] = groupSpec{Name: "research", CLIScope: "group", Models: bare.Groups[0].Models}
	dels, _ = plan(everything(), bare, true)
	inOrder(t, "a group's parts pruned", dels, []string{"mcp server files of group research", "egress rule of group research",
		"apt package curl of group research"})
	_, left = plan(everything(), empty, false)
	if len(left) == 0 || !strings.Contains(left[0], "users are never deleted") {
		t.Fatalf("without --prune, a user is left first: %v", left)
	}
}

// inOrder: each of want starts a change, in this order, none missing.
func inOrder(t *testing.T, what string, changes []change, want []string) {
	t.Helper()
	next := 0
	for _, ch := range changes {
		if next < len(want) && strings.HasPrefix(ch.what, want[next]) {
			next++
		}
	}
	if next < len(want) {
		var got []string
		for _, ch := range changes {
			got = append(got, ch.String())
		}
		t.Fatalf("%s: %q is missing or out of order in\n%s", what, want[next], strings.Join(got, "\n"))
	}
}

// Each kind's check refuses its part's own mistakes, and a document with
// one of everything passes them all.
func TestKindsCheckTheirParts(t *testing.T) {
	if err := everything().check(); err != nil {
		t.Fatalf("one of everything: %v", err)
	}
	cases := []struct {
		name string
		edit func(s *state)
		says string
	}{
		{"a user twice", func(s *state) { s.Users = append(s.Users, s.Users[0]) }, "user telegram:dana is listed twice"},
		{"a provider twice", func(s *state) { s.ModelProviders = append(s.ModelProviders, s.ModelProviders[0]) }, `model provider "anthropic" is empty or listed twice`},
		{"a group twice", func(s *state) { s.Groups = append(s.Groups, s.Groups[0]) }, "group research is listed twice"},
		{"a tool twice", func(s *state) {
			m := &s.Groups[0].MCPServers[0]
			m.Tools = append(m.Tools, m.Tools[0])
		}, `tool "read" is empty or listed twice`},
		{"a group's rule twice", func(s *state) {
			s.Groups[0].Models.Rules = []modelRuleSpec{{Provider: "anthropic", Model: "m", Effect: "allow"}, {Provider: "anthropic", Model: "m", Effect: "deny"}}
		}, `model rule of group research "anthropic/m"`},
		{"a chat without its id", func(s *state) { s.MessagingGroups[0].PlatformID = "" }, "channelType and platformId are required"},
		{"a member twice", func(s *state) { s.Members = append(s.Members, s.Members[0]) }, "member research/telegram:dana is listed twice"},
		{"a destination to both", func(s *state) { s.Destinations[0].Chat = "telegram/1" }, "exactly one of target and chat"},
		{"a policy twice", func(s *state) { s.Policies = append(s.Policies, s.Policies[0]) }, "policy research/research is listed twice"},
		{"a role twice", func(s *state) { s.Roles = append(s.Roles, s.Roles[0]) }, "is listed twice"},
		{"an action twice", func(s *state) { s.Catalog = append(s.Catalog, s.Catalog[0]) }, "catalog action a2a.send is listed twice"},
		{"a wiring without its group", func(s *state) { s.Wirings[0].Group = "" }, "chat and group are required"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := everything()
			c.edit(s)
			if err := s.check(); err == nil || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("check: %v, want %q", err, c.says)
			}
		})
	}
}

// The kinds' views are one a message type, and their commands one a name.
func TestKindsDeclareViewsAndCommandsOnce(t *testing.T) {
	views := allViews() // panics on a type given two views
	if len(views) < len(kinds()) {
		t.Fatalf("%d views for %d kinds", len(views), len(kinds()))
	}
	a := &app{}
	seen := map[string]bool{}
	for _, k := range kinds() {
		if k.command == nil {
			continue
		}
		var cmd *cobra.Command = k.command(a)
		if seen[cmd.Name()] {
			t.Fatalf("two kinds make the command %q", cmd.Name())
		}
		seen[cmd.Name()] = true
	}
	for _, k := range kinds() {
		if p := k.state; p != nil && (p.read == nil || p.plan == nil) {
			t.Fatal("a kind in the document reads and plans its part")
		}
	}
}
