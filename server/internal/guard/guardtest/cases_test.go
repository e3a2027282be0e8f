package guardtest

import (
	"context"
	"strings"
	"testing"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

const (
	allow = guardv1.Effect_EFFECT_ALLOW
	hold  = guardv1.Effect_EFFECT_HOLD
	deny  = guardv1.Effect_EFFECT_DENY

	groupScope  = guardv1.ApproverScope_APPROVER_SCOPE_GROUP
	globalScope = guardv1.ApproverScope_APPROVER_SCOPE_GLOBAL
)

// decideCase is one row of the table: {state, actor, action, payload} → decision.
// Placeholders {A} {B} {SA} {SB} {R} name the case's own groups, sessions
// and runner (see world).
type decideCase struct {
	name     string
	setup    string // SQL run before the decision
	actor    string // "host", "system", "human:<user>", "agent:{A}:{SA}"
	action   string
	resource map[string]string
	payload  map[string]any
	grant    string

	effect    guardv1.Effect
	scope     guardv1.ApproverScope // checked when set (hold)
	exclusive string                // exclusive approver, checked when set (hold)
	anchor    string                // admins-of-scope anchor group, checked when set (hold)
	reason    string                // substring of the reason
	again     guardv1.Effect        // set: the same request made again answers this
	check     string                // SQL returning a count that must equal checkN
	checkN    int
}

var cases = []decideCase{
	// ── non-catalog and the decision log ──
	{name: "non-catalog action allows", actor: "agent:{A}:{SA}", action: "test.unregistered-read", effect: allow, reason: "non-catalog action",
		check: `SELECT count(*) FROM decisions WHERE session_id = '{SA}' AND action = 'test.unregistered-read' AND effect = 'allow'`, checkN: 1},

	// ── agents.create (seed create-agent.test.ts) ──
	{name: "create_agent: global scope creates directly", setup: `INSERT INTO container_configs (agent_group_id, cli_scope) VALUES ('{A}', 'global')`,
		actor: "agent:{A}:{SA}", action: "agents.create", payload: map[string]any{"name": "Scout", "instructions": "help"}, effect: allow, reason: "trusted global-scope"},
	{name: "create_agent: group scope holds for the group's admins", setup: `INSERT INTO container_configs (agent_group_id, cli_scope) VALUES ('{A}', 'group')`,
		actor: "agent:{A}:{SA}", action: "agents.create", payload: map[string]any{"name": "Scout"}, effect: hold, scope: groupScope, anchor: "{A}"},
	{name: "create_agent: missing config fails closed to a hold",
		actor: "agent:{A}:{SA}", action: "agents.create", payload: map[string]any{"name": "Scout"}, effect: hold, scope: groupScope},
	{name: "create_agent: disabled scope holds", setup: `INSERT INTO container_configs (agent_group_id, cli_scope) VALUES ('{A}', 'disabled')`,
		actor: "agent:{A}:{SA}", action: "agents.create", payload: map[string]any{"name": "Scout"}, effect: hold},
	{name: "create_agent: empty name is refused, no hold", setup: `INSERT INTO container_configs (agent_group_id, cli_scope) VALUES ('{A}', 'global')`,
		actor: "agent:{A}:{SA}", action: "agents.create", payload: map[string]any{"name": ""}, effect: deny, reason: "name is required"},
	{name: "create_agent: unknown source group is refused",
		actor: "agent:{A}-gone", action: "agents.create", payload: map[string]any{"name": "Scout"}, effect: deny, reason: "source agent group not found"},
	{name: "create_agent: host is not a container", actor: "host", action: "agents.create", payload: map[string]any{"name": "Scout"}, effect: deny, reason: "container-originated"},
	{name: "create_agent: valid grant executes exactly once",
		setup: approvedHold("{A}-h1", "create_agent", "approved", `{"name":"Scout","instructions":"help"}`, false),
		actor: "agent:{A}:{SA}", action: "agents.create", payload: map[string]any{"name": "Scout", "instructions": "help"}, grant: "{A}-h1",
		effect: allow, reason: "satisfied by approval", again: deny,
		check: `SELECT count(*) FROM holds WHERE id = '{A}-h1' AND consumed_at IS NOT NULL`, checkN: 1},
	{name: "create_agent: dead grant (already consumed) refuses, never re-holds",
		setup: approvedHold("{A}-h2", "create_agent", "approved", `{"name":"Scout"}`, true),
		actor: "agent:{A}:{SA}", action: "agents.create", payload: map[string]any{"name": "Scout"}, grant: "{A}-h2", effect: deny, reason: "invalid or mismatched grant"},
	{name: "create_agent: grant of a deleted hold refuses",
		actor: "agent:{A}:{SA}", action: "agents.create", payload: map[string]any{"name": "Scout"}, grant: "{A}-nohold", effect: deny, reason: "invalid or mismatched grant"},
	{name: "create_agent: mismatched grant (approved for another name) refuses",
		setup: approvedHold("{A}-h3", "create_agent", "approved", `{"name":"OtherAgent"}`, false),
		actor: "agent:{A}:{SA}", action: "agents.create", payload: map[string]any{"name": "Scout"}, grant: "{A}-h3", effect: deny, reason: "invalid or mismatched grant",
		check: `SELECT count(*) FROM holds WHERE id = '{A}-h3' AND consumed_at IS NULL`, checkN: 1},
	{name: "create_agent: a grant on an allowed action is a no-op (not consumed)",
		setup: `INSERT INTO container_configs (agent_group_id, cli_scope) VALUES ('{A}', 'global');` + approvedHold("{A}-h4", "create_agent", "approved", `{"name":"Scout"}`, false),
		actor: "agent:{A}:{SA}", action: "agents.create", payload: map[string]any{"name": "Scout"}, grant: "{A}-h4", effect: allow, reason: "trusted",
		check: `SELECT count(*) FROM holds WHERE id = '{A}-h4' AND consumed_at IS NULL`, checkN: 1},

	// ── forged grants ──
	{name: "forged grant: a still-pending hold is no grant",
		setup: approvedHold("{A}-f1", "create_agent", "pending", `{"name":"Scout"}`, false),
		actor: "agent:{A}:{SA}", action: "agents.create", payload: map[string]any{"name": "Scout"}, grant: "{A}-f1", effect: deny, reason: "invalid or mismatched grant",
		check: `SELECT count(*) FROM holds WHERE id = '{A}-f1' AND status = 'pending' AND consumed_at IS NULL`, checkN: 1},
	{name: "forged grant: another action's approved hold does not transfer",
		setup: approvedHold("{A}-f2", "install_packages", "approved", `{"name":"Scout"}`, false),
		actor: "agent:{A}:{SA}", action: "agents.create", payload: map[string]any{"name": "Scout"}, grant: "{A}-f2", effect: deny, reason: "invalid or mismatched grant",
		check: `SELECT count(*) FROM holds WHERE id = '{A}-f2' AND consumed_at IS NULL`, checkN: 1},
	{name: "forged grant: a rejected hold is no grant",
		setup: approvedHold("{A}-f3", "create_agent", "rejected", `{"name":"Scout"}`, false),
		actor: "agent:{A}:{SA}", action: "agents.create", payload: map[string]any{"name": "Scout"}, grant: "{A}-f3", effect: deny, reason: "invalid or mismatched grant"},
	{name: "forged grant: another group's approval does not transfer",
		setup: approvedHold("{A}-f4", "create_agent", "approved", `{"name":"Scout"}`, false),
		actor: "agent:{B}:{SB}", action: "agents.create", payload: map[string]any{"name": "Scout"}, grant: "{A}-f4", effect: deny, reason: "invalid or mismatched grant"},

	// ── a2a.send (seed message-gate.test.ts) ──
	{name: "a2a: destination, no policy → allow", setup: `INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) VALUES ('{A}', 'b', '{B}')`,
		actor: "agent:{A}:{SA}", action: "a2a.send", resource: map[string]string{"to": "{B}"}, effect: allow, reason: "destination grant exists"},
	{name: "a2a: no destination → deny", actor: "agent:{A}:{SA}", action: "a2a.send", resource: map[string]string{"to": "{B}"},
		effect: deny, reason: "unauthorized agent-to-agent"},
	{name: "a2a: self-send allows without a destination", actor: "agent:{A}:{SA}", action: "a2a.send", resource: map[string]string{"to": "{A}"},
		effect: allow, reason: "self-send"},
	{name: "a2a: missing target group denies", actor: "agent:{A}-gone", action: "a2a.send", resource: map[string]string{"to": "{A}-gone"},
		payload: map[string]any{"id": "m1"}, effect: deny, reason: "not found for message m1"},
	{name: "a2a: message policy holds for its named approver only",
		setup: `INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) VALUES ('{A}', 'b', '{B}');
			INSERT INTO agent_message_policies (from_agent_group_id, to_agent_group_id, approver_user_id) VALUES ('{A}', '{B}', 'telegram:dana')`,
		actor: "agent:{A}:{SA}", action: "a2a.send", resource: map[string]string{"to": "{B}"}, effect: hold, exclusive: "telegram:dana", scope: groupScope},
	{name: "a2a: ghost policy (policy, no destination) still denies",
		setup: `INSERT INTO agent_message_policies (from_agent_group_id, to_agent_group_id, approver_user_id) VALUES ('{A}', '{B}', 'telegram:dana')`,
		actor: "agent:{A}:{SA}", action: "a2a.send", resource: map[string]string{"to": "{B}"}, effect: deny, reason: "unauthorized agent-to-agent"},
	{name: "a2a: approved replay delivers (valid grant), once",
		setup: `INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) VALUES ('{A}', 'b', '{B}');
			INSERT INTO agent_message_policies (from_agent_group_id, to_agent_group_id, approver_user_id) VALUES ('{A}', '{B}', 'telegram:dana');` +
			approvedHold("{A}-m1", "a2a_message_gate", "approved", `{"id":"held-1","to":"{B}","text":"approved!"}`, false),
		actor: "agent:{A}:{SA}", action: "a2a.send", resource: map[string]string{"to": "{B}"}, payload: map[string]any{"id": "held-1"}, grant: "{A}-m1",
		effect: allow, again: deny},
	{name: "a2a: D3 destination revoked between hold and approve blocks the replay",
		setup: `INSERT INTO agent_message_policies (from_agent_group_id, to_agent_group_id, approver_user_id) VALUES ('{A}', '{B}', 'telegram:dana');` +
			approvedHold("{A}-m2", "a2a_message_gate", "approved", `{"id":"held-2","to":"{B}"}`, false),
		actor: "agent:{A}:{SA}", action: "a2a.send", resource: map[string]string{"to": "{B}"}, grant: "{A}-m2", effect: deny, reason: "unauthorized agent-to-agent",
		check: `SELECT count(*) FROM holds WHERE id = '{A}-m2' AND consumed_at IS NULL`, checkN: 1},
	{name: "a2a: mismatched grant (held for another target) refuses",
		setup: `INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) VALUES ('{A}', 'b', '{B}');
			INSERT INTO agent_message_policies (from_agent_group_id, to_agent_group_id, approver_user_id) VALUES ('{A}', '{B}', 'telegram:dana');` +
			approvedHold("{A}-m3", "a2a_message_gate", "approved", `{"id":"other","platform_id":"{A}"}`, false),
		actor: "agent:{A}:{SA}", action: "a2a.send", resource: map[string]string{"to": "{B}"}, grant: "{A}-m3", effect: deny, reason: "invalid or mismatched grant"},
	{name: "a2a: a consumed grant does not work twice",
		setup: `INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) VALUES ('{A}', 'b', '{B}');
			INSERT INTO agent_message_policies (from_agent_group_id, to_agent_group_id, approver_user_id) VALUES ('{A}', '{B}', 'telegram:dana');` +
			approvedHold("{A}-m4", "a2a_message_gate", "approved", `{"to":"{B}"}`, true),
		actor: "agent:{A}:{SA}", action: "a2a.send", resource: map[string]string{"to": "{B}"}, grant: "{A}-m4", effect: deny, reason: "invalid or mismatched grant"},
	{name: "a2a: humans cannot send as agents", actor: "human:telegram:eve", action: "a2a.send", resource: map[string]string{"to": "{B}"},
		effect: deny, reason: "requires an agent actor"},

	// ── self_mod.* ──
	{name: "install_packages always holds", actor: "agent:{A}:{SA}", action: "self_mod.install_packages",
		payload: map[string]any{"apt": []any{"curl"}, "npm": []any{"@scope/pkg"}}, effect: hold, scope: groupScope, anchor: "{A}"},
	{name: "install_packages: no packages refused", actor: "agent:{A}:{SA}", action: "self_mod.install_packages",
		payload: map[string]any{}, effect: deny, reason: "at least one apt or npm package"},
	{name: "install_packages: more than 20 refused", actor: "agent:{A}:{SA}", action: "self_mod.install_packages",
		payload: map[string]any{"apt": manyPackages(21)}, effect: deny, reason: "max 20 packages"},
	{name: "install_packages: bad apt name refused", actor: "agent:{A}:{SA}", action: "self_mod.install_packages",
		payload: map[string]any{"apt": []any{"curl; rm -rf /"}}, effect: deny, reason: "invalid apt package name"},
	{name: "install_packages: bad npm name refused", actor: "agent:{A}:{SA}", action: "self_mod.install_packages",
		payload: map[string]any{"npm": []any{"Evil/../x"}}, effect: deny, reason: "invalid npm package name"},
	{name: "install_packages: host is not a container", actor: "host", action: "self_mod.install_packages",
		payload: map[string]any{"apt": []any{"curl"}}, effect: deny, reason: "container-originated"},
	{name: "install_packages: grant bound to the approved packages",
		setup: approvedHold("{A}-p1", "install_packages", "approved", `{"apt":["curl"]}`, false),
		actor: "agent:{A}:{SA}", action: "self_mod.install_packages", payload: map[string]any{"apt": []any{"wget"}}, grant: "{A}-p1",
		effect: deny, reason: "invalid or mismatched grant"},
	{name: "install_packages: matching grant allows once",
		setup: approvedHold("{A}-p2", "install_packages", "approved", `{"apt":["curl"]}`, false),
		actor: "agent:{A}:{SA}", action: "self_mod.install_packages", payload: map[string]any{"apt": []any{"curl"}}, grant: "{A}-p2",
		effect: allow, again: deny},
	{name: "add_mcp_server holds", actor: "agent:{A}:{SA}", action: "self_mod.add_mcp_server",
		payload: map[string]any{"name": "fs", "command": "mcp-fs"}, effect: hold, scope: groupScope},
	{name: "add_mcp_server: needs name and command", actor: "agent:{A}:{SA}", action: "self_mod.add_mcp_server",
		payload: map[string]any{"name": "fs"}, effect: deny, reason: "name and command are required"},

	// ── channels.register / senders.admit ──
	{name: "channels.register: owner may register",
		setup: `INSERT INTO users (id) VALUES ('telegram:{A}-own') ON CONFLICT DO NOTHING;
			INSERT INTO user_roles (user_id, role) VALUES ('telegram:{A}-own', 'owner');
			INSERT INTO messaging_groups (id, channel_type, platform_id) VALUES ('{A}-mg', 'telegram', '{A}-chat');
			INSERT INTO pending_channel_registrations (messaging_group_id, approver_user_id) VALUES ('{A}-mg', 'telegram:{A}-dana')`,
		actor: "human:telegram:{A}-own", action: "channels.register", resource: map[string]string{"messaging_group": "{A}-mg"}, effect: allow},
	{name: "channels.register: the delivered-to approver may register",
		setup: `INSERT INTO messaging_groups (id, channel_type, platform_id) VALUES ('{A}-mg', 'telegram', '{A}-chat');
			INSERT INTO pending_channel_registrations (messaging_group_id, approver_user_id) VALUES ('{A}-mg', 'telegram:{A}-dana')`,
		actor: "human:telegram:{A}-dana", action: "channels.register", resource: map[string]string{"messaging_group": "{A}-mg"}, effect: allow},
	{name: "channels.register: a scoped admin may not (D4)",
		setup: `INSERT INTO users (id) VALUES ('telegram:{A}-adm');
			INSERT INTO user_roles (user_id, role, agent_group_id) VALUES ('telegram:{A}-adm', 'admin', '{A}');
			INSERT INTO messaging_groups (id, channel_type, platform_id) VALUES ('{A}-mg', 'telegram', '{A}-chat');
			INSERT INTO pending_channel_registrations (messaging_group_id, approver_user_id) VALUES ('{A}-mg', 'telegram:{A}-dana')`,
		actor: "human:telegram:{A}-adm", action: "channels.register", resource: map[string]string{"messaging_group": "{A}-mg"}, effect: deny, reason: "not an eligible"},
	{name: "channels.register: no pending registration denies",
		actor: "human:telegram:{A}-dana", action: "channels.register", resource: map[string]string{"messaging_group": "{A}-nomg"}, effect: deny, reason: "no pending channel registration"},
	{name: "channels.register: agents cannot register", actor: "agent:{A}:{SA}", action: "channels.register", effect: deny, reason: "human approver"},
	{name: "senders.admit: public chat allows",
		setup: `INSERT INTO messaging_groups (id, channel_type, platform_id, unknown_sender_policy) VALUES ('{A}-mg', 'telegram', '{A}-chat', 'public')`,
		actor: "human:telegram:stranger", action: "senders.admit", resource: map[string]string{"messaging_group": "{A}-mg"}, effect: allow},
	{name: "senders.admit: request_approval holds for the wired group's admins",
		setup: `INSERT INTO messaging_groups (id, channel_type, platform_id, unknown_sender_policy) VALUES ('{A}-mg', 'telegram', '{A}-chat', 'request_approval');
			INSERT INTO messaging_group_agents (id, messaging_group_id, agent_group_id) VALUES ('{A}-w', '{A}-mg', '{A}')`,
		actor: "human:telegram:stranger", action: "senders.admit", resource: map[string]string{"messaging_group": "{A}-mg"}, effect: hold, anchor: "{A}", scope: groupScope},
	{name: "senders.admit: strict denies",
		setup: `INSERT INTO messaging_groups (id, channel_type, platform_id, unknown_sender_policy) VALUES ('{A}-mg', 'telegram', '{A}-chat', 'strict')`,
		actor: "human:telegram:stranger", action: "senders.admit", resource: map[string]string{"messaging_group": "{A}-mg"}, effect: deny, reason: "policy strict"},
	{name: "senders.admit: an approval admits its sender once",
		setup: `INSERT INTO messaging_groups (id, channel_type, platform_id, unknown_sender_policy) VALUES ('{A}-mg', 'telegram', '{A}-chat', 'request_approval');
			INSERT INTO messaging_group_agents (id, messaging_group_id, agent_group_id) VALUES ('{A}-w', '{A}-mg', '{A}');` +
			approvedHold("{A}-s1", "sender_admit", "approved", `{"sender_user_id":"telegram:stranger","messaging_group_id":"{A}-mg"}`, false),
		actor: "human:telegram:stranger", action: "senders.admit", resource: map[string]string{"messaging_group": "{A}-mg"}, grant: "{A}-s1",
		effect: allow, again: deny},
	{name: "senders.admit: an approval for one sender does not admit another",
		setup: `INSERT INTO messaging_groups (id, channel_type, platform_id, unknown_sender_policy) VALUES ('{A}-mg', 'telegram', '{A}-chat', 'request_approval');
			INSERT INTO messaging_group_agents (id, messaging_group_id, agent_group_id) VALUES ('{A}-w', '{A}-mg', '{A}');` +
			approvedHold("{A}-s2", "sender_admit", "approved", `{"sender_user_id":"telegram:stranger","messaging_group_id":"{A}-mg"}`, false),
		actor: "human:telegram:mallory", action: "senders.admit", resource: map[string]string{"messaging_group": "{A}-mg"}, grant: "{A}-s2",
		effect: deny, reason: "invalid or mismatched grant",
		check: `SELECT count(*) FROM holds WHERE id = '{A}-s2' AND consumed_at IS NULL`, checkN: 1},
	{name: "senders.admit: unknown chat denies (no policy is not public)",
		actor: "human:telegram:stranger", action: "senders.admit", resource: map[string]string{"messaging_group": "{A}-nomg"}, payload: map[string]any{"policy": "public"},
		effect: deny},

	// ── admin RPCs: scope and blast radius (seed dispatch.test.ts) ──
	{name: "admin: host may do anything", actor: "host", action: "roles.grant", payload: map[string]any{"user_id": "telegram:mallory"}, effect: allow, reason: "host"},
	{name: "admin: humans may not mutate", actor: "human:telegram:eve", action: "members.add", payload: map[string]any{"group": "{A}", "user_id": "telegram:eve"},
		effect: deny, reason: "host or agent callers only"},
	{name: "admin: humans may read (handlers scope to their roles)", actor: "human:telegram:eve", action: "groups.list", effect: allow, reason: "scoped to the user's roles"},
	{name: "admin: humans may read approvals (filtered by approvals)", actor: "human:telegram:eve", action: "approvals.list", effect: allow},
	{name: "admin: a bridge or bare runner (system) may not use admin RPCs", actor: "system", action: "groups.list", effect: deny, reason: "host or agent callers only"},
	{name: "admin: disabled scope denies everything", setup: `INSERT INTO container_configs (agent_group_id, cli_scope) VALUES ('{A}', 'disabled')`,
		actor: "agent:{A}:{SA}", action: "groups.list", effect: deny, reason: "disabled"},
	{name: "admin: group scope allows own-group reads", actor: "agent:{A}:{SA}", action: "groups.list", effect: allow, reason: "open command"},
	{name: "admin: group scope refuses non-scoped resources", actor: "agent:{A}:{SA}", action: "roles.list", effect: deny, reason: `Cannot access "roles"`},
	{name: "admin: group scope refuses another group's args", actor: "agent:{A}:{SA}", action: "members.list", payload: map[string]any{"group": "{B}"},
		effect: deny, reason: "scoped to this agent group"},
	{name: "admin: group scope refuses another group's id (groups)", actor: "agent:{A}:{SA}", action: "groups.get", payload: map[string]any{"id": "{B}"},
		effect: deny, reason: "scoped to this agent group"},
	{name: "admin: id is not a group for sessions", actor: "agent:{A}:{SA}", action: "sessions.get", payload: map[string]any{"id": "{SB}"}, effect: allow},
	{name: "admin: group scope may not change cli_scope", actor: "agent:{A}:{SA}", action: "groups.config.update",
		payload: map[string]any{"group": "{A}", "cli_scope": "CLI_SCOPE_GLOBAL"}, effect: deny, reason: "Cannot change cli_scope"},
	{name: "admin: held mutation pinned to own group has group scope", actor: "agent:{A}:{SA}", action: "members.add",
		payload: map[string]any{"group": "{A}", "user_id": "telegram:new"}, effect: hold, scope: groupScope, anchor: "{A}"},
	{name: "admin: D1 non-scoped resource holds with global scope", setup: `INSERT INTO container_configs (agent_group_id, cli_scope) VALUES ('{A}', 'global')`,
		actor: "agent:{A}:{SA}", action: "roles.grant", payload: map[string]any{"user_id": "telegram:mallory", "role": "ROLE_OWNER"}, effect: hold, scope: globalScope},
	{name: "admin: D1 targeting another group escalates to global", setup: `INSERT INTO container_configs (agent_group_id, cli_scope) VALUES ('{A}', 'global')`,
		actor: "agent:{A}:{SA}", action: "groups.update", payload: map[string]any{"id": "{B}"}, effect: hold, scope: globalScope},
	{name: "admin: global scope reads anything", setup: `INSERT INTO container_configs (agent_group_id, cli_scope) VALUES ('{A}', 'global')`,
		actor: "agent:{A}:{SA}", action: "roles.list", effect: allow},
	{name: "admin: a cli_command grant binds to the exact request",
		setup: approvedHold("{A}-c1", "cli_command", "approved", `{"method":"/guard.v1.Registry/AddMember","request":{"group":"{A}","user_id":"telegram:new"}}`, false),
		actor: "agent:{A}:{SA}", action: "members.add", payload: map[string]any{"group": "{A}", "user_id": "telegram:other"}, grant: "{A}-c1",
		effect: deny, reason: "invalid or mismatched grant"},
	{name: "admin: a cli_command grant for the exact request allows once",
		setup: approvedHold("{A}-c2", "cli_command", "approved", `{"method":"/guard.v1.Registry/AddMember","request":{"group":"{A}","user_id":"telegram:new"}}`, false),
		actor: "agent:{A}:{SA}", action: "members.add", payload: map[string]any{"group": "{A}", "user_id": "telegram:new"}, grant: "{A}-c2",
		effect: allow, again: deny},
	{name: "admin: a cli_command grant never loosens a deny", setup: `INSERT INTO container_configs (agent_group_id, cli_scope) VALUES ('{A}', 'disabled');` +
		approvedHold("{A}-c3", "cli_command", "approved", `{"method":"/guard.v1.Registry/AddMember","request":{"group":"{A}","user_id":"telegram:new"}}`, false),
		actor: "agent:{A}:{SA}", action: "members.add", payload: map[string]any{"group": "{A}", "user_id": "telegram:new"}, grant: "{A}-c3",
		effect: deny, reason: "disabled"},
}

func manyPackages(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = "pkg" + string(rune('a'+i%26))
	}
	return out
}

func TestDecisionTable(t *testing.T) {
	srv := testserver.Start(t)
	op := srv.Operator(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, srv)
			w.exec(c.setup)
			req := &guardv1.DecideRequest{Action: c.action, Actor: w.actor(c.actor), Resource: w.resource(c.resource),
				Payload: w.payload(c.payload), Grant: w.sub(c.grant)}
			resp, err := op.Guard.Decide(context.Background(), req)
			if err != nil {
				t.Fatalf("Decide: %v", err)
			}
			d := resp.GetDecision()
			if d.GetEffect() != c.effect {
				t.Fatalf("effect %v (%q), want %v", d.GetEffect(), d.GetReason(), c.effect)
			}
			if c.reason != "" && !strings.Contains(d.GetReason(), w.sub(c.reason)) {
				t.Errorf("reason %q, want it to contain %q", d.GetReason(), w.sub(c.reason))
			}
			if c.scope != 0 && d.GetApproverScope() != c.scope {
				t.Errorf("scope %v, want %v", d.GetApproverScope(), c.scope)
			}
			if c.exclusive != "" && d.GetApproverRule().GetExclusive().GetUserId() != c.exclusive {
				t.Errorf("rule %v, want exclusive %s", d.GetApproverRule(), c.exclusive)
			}
			if c.anchor != "" && d.GetApproverRule().GetAdminsOfScope().GetAgentGroupId() != w.sub(c.anchor) {
				t.Errorf("rule %v, want admins of %s", d.GetApproverRule(), w.sub(c.anchor))
			}
			if resp.GetDecisionId() == "" || w.count(`SELECT count(*) FROM decisions WHERE id = '`+resp.GetDecisionId()+`'`) != 1 {
				t.Errorf("decision %q not in the log", resp.GetDecisionId())
			}
			if c.again != 0 {
				again, err := op.Guard.Decide(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				if again.GetDecision().GetEffect() != c.again {
					t.Errorf("second call: %v (%q), want %v", again.GetDecision().GetEffect(), again.GetDecision().GetReason(), c.again)
				}
			}
			if c.check != "" {
				if n := w.count(c.check); n != c.checkN {
					t.Errorf("%s = %d, want %d", w.sub(c.check), n, c.checkN)
				}
			}
			// No decision here ever created a hold (no card was given).
			if n := w.count(`SELECT count(*) FROM holds WHERE agent_group_id IN ('{A}', '{B}') AND created_at > now() - interval '1 minute' AND id NOT LIKE '{A}-%'`); n != 0 {
				t.Errorf("%d holds created without a card", n)
			}
		})
	}
}
