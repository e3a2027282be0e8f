package netconnect_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/clawguard/clawguard/migrations/pgtest"
	"github.com/clawguard/clawguard/proto/egressrule"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// world is a group research with sessions s1 and s2 on runner r1, and an
// owner dana.
type world struct {
	srv    *testserver.Server
	op     testserver.Clients
	agent  testserver.Clients // runner r1 asserting session s1
	agent2 testserver.Clients // runner r1 asserting session s2
	ctx    context.Context
	group  string
}

const owner = "telegram:dana"

func newWorld(t *testing.T) *world {
	t.Helper()
	srv := testserver.Start(t)
	ctx := context.Background()
	w := &world{srv: srv, op: srv.Operator(t), ctx: ctx}
	g, err := w.op.Registry.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: "research"})
	if err != nil {
		t.Fatal(err)
	}
	w.group = g.GetGroup().GetId()
	for _, q := range []string{
		`INSERT INTO runners (id, host, lease_expires_at) VALUES ('r1', 'h', now() + interval '1 hour')`,
		`INSERT INTO sessions (id, agent_group_id, runner_id) VALUES ('s1', '` + w.group + `', 'r1'), ('s2', '` + w.group + `', 'r1')`,
	} {
		if _, err := srv.Pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := w.op.Registry.CreateUser(ctx, &guardv1.CreateUserRequest{Id: owner}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.op.Registry.GrantRole(ctx, &guardv1.GrantRoleRequest{UserId: owner, Role: guardv1.Role_ROLE_OWNER, Scope: guardv1.RoleScope_ROLE_SCOPE_GLOBAL}); err != nil {
		t.Fatal(err)
	}
	tok := srv.Token(t, "runner", "r1", "")
	w.agent = testserver.ClientsFor(srv.Conn(t, tok, "s1"))
	w.agent2 = testserver.ClientsFor(srv.Conn(t, tok, "s2"))
	return w
}

// connect is a net.connect request as the runner's egress proxy sends it.
func connect(t *testing.T, host, port string) *guardv1.DecideRequest {
	t.Helper()
	p, err := structpb.NewStruct(map[string]any{egressrule.KeyHost: host, egressrule.KeyPort: port})
	if err != nil {
		t.Fatal(err)
	}
	return &guardv1.DecideRequest{Action: egressrule.CatalogAction, Payload: p,
		Resource: map[string]string{egressrule.KeyHost: host, egressrule.KeyPort: port},
		Card:     &guardv1.HoldCard{Title: "Connect to " + host + ":" + port, Question: "connect?", DedupKey: "net_connect:" + host + ":" + port}}
}

func (w *world) decide(t *testing.T, c testserver.Clients, req *guardv1.DecideRequest) *guardv1.DecideResponse {
	t.Helper()
	resp, err := c.Guard.Decide(w.ctx, req)
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}
	return resp
}

func (w *world) rule(t *testing.T, host string, port int32, e guardv1.Effect) {
	t.Helper()
	if _, err := w.op.Registry.SetEgressRule(w.ctx, &guardv1.SetEgressRuleRequest{Group: w.group, Host: host, Port: port, Effect: e}); err != nil {
		t.Fatalf("SetEgressRule %s: %v", host, err)
	}
}

func effect(r *guardv1.DecideResponse) guardv1.Effect { return r.GetDecision().GetEffect() }

// Rules decide: most restrictive wins, no port means 443 and 80, wildcards
// cover names below (not the apex), the default holds until set.
func TestRulesDecide(t *testing.T) {
	w := newWorld(t)
	w.rule(t, "*.github.com", 0, guardv1.Effect_EFFECT_ALLOW)
	w.rule(t, "gist.github.com", 0, guardv1.Effect_EFFECT_DENY)
	w.rule(t, "github.com", 22, guardv1.Effect_EFFECT_ALLOW)
	cases := []struct {
		host, port string
		want       guardv1.Effect
		reason     string
	}{
		{"api.github.com", "443", guardv1.Effect_EFFECT_ALLOW, "*.github.com (443, 80)"},
		{"api.github.com", "80", guardv1.Effect_EFFECT_ALLOW, "*.github.com"},
		{"gist.github.com", "443", guardv1.Effect_EFFECT_DENY, "gist.github.com"},
		{"github.com", "443", guardv1.Effect_EFFECT_HOLD, "default is hold"},
		{"github.com", "22", guardv1.Effect_EFFECT_ALLOW, "github.com:22"},
		{"api.github.com", "8443", guardv1.Effect_EFFECT_HOLD, "default is hold"},
		{"example.org", "443", guardv1.Effect_EFFECT_HOLD, "example.org:443"},
	}
	for _, c := range cases {
		r := w.decide(t, w.agent, connect(t, c.host, c.port))
		if effect(r) != c.want || !strings.Contains(r.GetDecision().GetReason(), c.reason) {
			t.Errorf("%s:%s: %v %q, want %v naming %q", c.host, c.port, effect(r), r.GetDecision().GetReason(), c.want, c.reason)
		}
	}
	if _, err := w.op.Registry.SetEgressDefault(w.ctx, &guardv1.SetEgressDefaultRequest{Group: w.group, Effect: guardv1.Effect_EFFECT_DENY}); err != nil {
		t.Fatal(err)
	}
	if r := w.decide(t, w.agent, connect(t, "example.org", "443")); effect(r) != guardv1.Effect_EFFECT_DENY || r.GetHoldId() != "" {
		t.Errorf("default deny: %v hold %q", r.GetDecision(), r.GetHoldId())
	}
	pol, err := w.op.Registry.GetEgressPolicy(w.ctx, &guardv1.GetEgressPolicyRequest{Group: w.group})
	if err != nil || len(pol.GetPolicy().GetRules()) != 3 || pol.GetPolicy().GetDefaultEffect() != guardv1.Effect_EFFECT_DENY {
		t.Fatalf("GetEgressPolicy = %v, %v", pol, err)
	}
	if _, err := w.op.Registry.UnsetEgressRule(w.ctx, &guardv1.UnsetEgressRuleRequest{Group: w.group, Host: "GIST.github.com"}); err != nil {
		t.Fatal(err)
	}
	if r := w.decide(t, w.agent, connect(t, "gist.github.com", "443")); effect(r) != guardv1.Effect_EFFECT_ALLOW {
		t.Errorf("after unset: %v", r.GetDecision())
	}
}

// Malformed destinations and settings are refused before any hold.
func TestMalformedRefused(t *testing.T) {
	w := newWorld(t)
	for _, hp := range [][2]string{{"Example.org", "443"}, {"exa mple.org", "443"}, {"example.org", "0"}, {"example.org", "99999"},
		{"example.org", "443 "}, {"127.1", "80"}, {"", "443"}} {
		r := w.decide(t, w.agent, connect(t, hp[0], hp[1]))
		if effect(r) != guardv1.Effect_EFFECT_DENY || r.GetHoldId() != "" || r.GetDecision().GetDecidedBy() != "precheck" {
			t.Errorf("%q:%q: %v hold %q, want a precheck deny", hp[0], hp[1], r.GetDecision(), r.GetHoldId())
		}
	}
	// A payload naming another destination than the decided one.
	req := connect(t, "example.org", "443")
	req.Payload.Fields[egressrule.KeyHost] = structpb.NewStringValue("evil.example")
	if r := w.decide(t, w.agent, req); effect(r) != guardv1.Effect_EFFECT_DENY || r.GetHoldId() != "" {
		t.Errorf("mismatched payload: %v", r.GetDecision())
	}
	for _, bad := range []*guardv1.SetEgressRuleRequest{
		{Group: w.group, Host: "*", Effect: guardv1.Effect_EFFECT_ALLOW},
		{Group: w.group, Host: "*.com", Effect: guardv1.Effect_EFFECT_ALLOW},
		{Group: w.group, Host: "a.*.com", Effect: guardv1.Effect_EFFECT_ALLOW},
		{Group: w.group, Host: "example.org", Effect: guardv1.Effect_EFFECT_UNSPECIFIED},
		{Group: "ag_nope", Host: "example.org", Effect: guardv1.Effect_EFFECT_ALLOW},
	} {
		_, err := w.op.Registry.SetEgressRule(w.ctx, bad)
		if c := status.Code(err); c != codes.InvalidArgument && c != codes.NotFound {
			t.Errorf("SetEgressRule(%v) = %v, want InvalidArgument or NotFound", bad, err)
		}
	}
}

// A held destination is asked once per session; its approval is used by the
// session's next connection only, once; another session is asked again.
func TestApprovalUsedByTheNextConnectionOnce(t *testing.T) {
	w := newWorld(t)
	first := w.decide(t, w.agent, connect(t, "example.org", "443"))
	again := w.decide(t, w.agent, connect(t, "example.org", "443"))
	if effect(first) != guardv1.Effect_EFFECT_HOLD || first.GetHoldId() == "" || again.GetHoldId() != first.GetHoldId() {
		t.Fatalf("held twice: %v / %v, want one hold", first, again)
	}
	if _, err := w.op.Approvals.Resolve(w.ctx, &guardv1.ResolveRequest{Id: first.GetHoldId(), Outcome: guardv1.Outcome_OUTCOME_APPROVE, AsUser: owner}); err != nil {
		t.Fatal(err)
	}
	if r := w.decide(t, w.agent2, connect(t, "example.org", "443")); effect(r) != guardv1.Effect_EFFECT_HOLD || r.GetHoldId() == first.GetHoldId() {
		t.Fatalf("another session used s1's approval: %v", r)
	}
	used := w.decide(t, w.agent, connect(t, "example.org", "443"))
	if effect(used) != guardv1.Effect_EFFECT_ALLOW || !strings.Contains(used.GetDecision().GetReason(), first.GetHoldId()) {
		t.Fatalf("next connection: %v, want ALLOW naming hold %s", used.GetDecision(), first.GetHoldId())
	}
	var consumedBy string
	if err := w.srv.Pool.QueryRow(w.ctx, `SELECT consumed_by FROM holds WHERE id = $1`, first.GetHoldId()).Scan(&consumedBy); err != nil || consumedBy != used.GetDecisionId() {
		t.Fatalf("hold consumed by %q, %v; want %s", consumedBy, err, used.GetDecisionId())
	}
	if r := w.decide(t, w.agent, connect(t, "example.org", "443")); effect(r) != guardv1.Effect_EFFECT_HOLD || r.GetHoldId() == first.GetHoldId() {
		t.Fatalf("a second connection after a once-approval: %v, want a new hold", r)
	}
	// Another destination is another question.
	if r := w.decide(t, w.agent, connect(t, "example.org", "8443")); effect(r) != guardv1.Effect_EFFECT_HOLD {
		t.Fatalf("other port: %v", r.GetDecision())
	}
}

// An approval for N hours is a standing grant of the group for host:port.
func TestApprovalForHoursCoversTheGroup(t *testing.T) {
	w := newWorld(t)
	h := w.decide(t, w.agent, connect(t, "pypi.org", "443"))
	if _, err := w.op.Approvals.Resolve(w.ctx, &guardv1.ResolveRequest{Id: h.GetHoldId(), Outcome: guardv1.Outcome_OUTCOME_APPROVE,
		AsUser: owner, StandingFor: durationpb.New(3600e9)}); err != nil {
		t.Fatal(err)
	}
	for i, c := range []testserver.Clients{w.agent, w.agent2, w.agent} {
		if r := w.decide(t, c, connect(t, "pypi.org", "443")); effect(r) != guardv1.Effect_EFFECT_ALLOW {
			t.Fatalf("use %d: %v", i, r.GetDecision())
		}
	}
	if r := w.decide(t, w.agent, connect(t, "files.pypi.org", "443")); effect(r) != guardv1.Effect_EFFECT_HOLD {
		t.Fatalf("a standing grant is never broader than host:port: %v", r.GetDecision())
	}
}

// A rejected hold leaves nothing to use; a revoked approver's approval is
// not used; a freeze denies an allowed destination.
func TestRejectRevokeAndFreeze(t *testing.T) {
	w := newWorld(t)
	h := w.decide(t, w.agent, connect(t, "example.org", "443"))
	if _, err := w.op.Approvals.Resolve(w.ctx, &guardv1.ResolveRequest{Id: h.GetHoldId(), Outcome: guardv1.Outcome_OUTCOME_REJECT, AsUser: owner}); err != nil {
		t.Fatal(err)
	}
	if r := w.decide(t, w.agent, connect(t, "example.org", "443")); effect(r) != guardv1.Effect_EFFECT_HOLD {
		t.Fatalf("after reject: %v", r.GetDecision())
	}
	h2 := w.decide(t, w.agent, connect(t, "example.net", "443"))
	if _, err := w.op.Approvals.Resolve(w.ctx, &guardv1.ResolveRequest{Id: h2.GetHoldId(), Outcome: guardv1.Outcome_OUTCOME_APPROVE, AsUser: owner}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.op.Registry.RevokeRole(w.ctx, &guardv1.RevokeRoleRequest{UserId: owner, Role: guardv1.Role_ROLE_OWNER, Scope: guardv1.RoleScope_ROLE_SCOPE_GLOBAL}); err != nil {
		t.Fatal(err)
	}
	if r := w.decide(t, w.agent, connect(t, "example.net", "443")); effect(r) == guardv1.Effect_EFFECT_ALLOW {
		t.Fatalf("an approval of a revoked owner was used: %v", r.GetDecision())
	}
	w.rule(t, "example.com", 0, guardv1.Effect_EFFECT_ALLOW)
	if _, err := w.op.Registry.Freeze(w.ctx, &guardv1.FreezeRequest{Scope: guardv1.FreezeScope_FREEZE_SCOPE_GROUP, Group: w.group, Reason: "incident"}); err != nil {
		t.Fatal(err)
	}
	if r := w.decide(t, w.agent, connect(t, "example.com", "443")); effect(r) != guardv1.Effect_EFFECT_DENY || r.GetDecision().GetDecidedBy() != "freeze" {
		t.Fatalf("frozen group: %v", r.GetDecision())
	}
}

// Audit mode lets a held destination through and logs what enforce would do.
func TestAuditModeLogsWouldHold(t *testing.T) {
	w := newWorld(t)
	if _, err := w.op.Registry.SetActionSettings(w.ctx, &guardv1.SetActionSettingsRequest{Action: egressrule.CatalogAction,
		Mode: guardv1.EnforcementMode_ENFORCEMENT_MODE_AUDIT}); err != nil {
		t.Fatal(err)
	}
	r := w.decide(t, w.agent, connect(t, "example.org", "443"))
	if effect(r) != guardv1.Effect_EFFECT_ALLOW || r.GetDecision().GetWouldEffect() != guardv1.Effect_EFFECT_HOLD || r.GetHoldId() != "" {
		t.Fatalf("audit: %v hold %q, want ALLOW that would hold", r.GetDecision(), r.GetHoldId())
	}
}

// An agent's own change of its egress rules is an admin command: held.
func TestAgentChangingItsRulesIsHeld(t *testing.T) {
	w := newWorld(t)
	_, err := w.agent.Registry.SetEgressRule(w.ctx, &guardv1.SetEgressRuleRequest{Group: w.group, Host: "evil.example", Effect: guardv1.Effect_EFFECT_ALLOW})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("agent SetEgressRule = %v, want FailedPrecondition (held)", err)
	}
	pol, err := w.op.Registry.GetEgressPolicy(w.ctx, &guardv1.GetEgressPolicyRequest{Group: w.group})
	if err != nil || len(pol.GetPolicy().GetRules()) != 0 {
		t.Fatalf("rules after a held change: %v, %v", pol, err)
	}
}
