package approvals_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/clawguard/clawguard/migrations/pgtest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/config"
	"github.com/clawguard/clawguard/server/internal/metrics"
)

func TestMain(m *testing.M) {
	if url := os.Getenv("ESCALATION_CHILD_DB"); url != "" {
		os.Exit(escalationSweepChild(url)) // a replica TestEscalationAcrossAReplicaSIGKILL kills
	}
	os.Exit(pgtest.Main(m))
}

// The seed's cast (approver-rule.test.ts).
const (
	owner       = "slack:owner"
	globalAdmin = "slack:global-admin"
	scopedAdmin = "slack:scoped-admin" // admin @ ag-1
	otherAdmin  = "slack:other-admin"  // admin @ ag-2
	deliveree   = "slack:deliveree"    // no role: the user a card was delivered to
	rando       = "slack:rando"        // no role
)

// fixture is the seed's beforeEach on a fresh database: two groups, the
// six users, roles granted in a fixed order (grant time decides picking).
func fixture(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := pgtest.NewPool(t)
	exec(t, pool, `INSERT INTO agent_groups (id, name) VALUES ('ag-1', 'one'), ('ag-2', 'two')`)
	for _, u := range []string{owner, globalAdmin, scopedAdmin, otherAdmin, deliveree, rando} {
		exec(t, pool, `INSERT INTO users (id) VALUES ($1)`, u)
	}
	exec(t, pool, `INSERT INTO user_roles (user_id, role, agent_group_id, granted_at) VALUES
		($1, 'owner', NULL, now() - interval '4 hours'),
		($2, 'admin', NULL, now() - interval '3 hours'),
		($3, 'admin', 'ag-1', now() - interval '2 hours'),
		($4, 'admin', 'ag-2', now() - interval '1 hours')`, owner, globalAdmin, scopedAdmin, otherAdmin)
	return pool
}

func exec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func newService(t *testing.T, pool *pgxpool.Pool) *approvals.Service {
	t.Helper()
	cfg := config.Default()
	return approvals.New(pool, metrics.NewMetrics(prometheus.NewRegistry()), slog.New(slog.NewTextHandler(io.Discard, nil)), cfg)
}

func exclusive(u string) *guardv1.ApproverRule {
	return &guardv1.ApproverRule{Kind: &guardv1.ApproverRule_Exclusive{Exclusive: &guardv1.ExclusiveApprover{UserId: u}}}
}

func adminsOf(group, deliveredTo string) *guardv1.ApproverRule {
	return &guardv1.ApproverRule{Kind: &guardv1.ApproverRule_AdminsOfScope{AdminsOfScope: &guardv1.AdminsOfScope{AgentGroupId: group, DeliveredTo: deliveredTo}}}
}

const (
	group  = guardv1.ApproverScope_APPROVER_SCOPE_GROUP
	global = guardv1.ApproverScope_APPROVER_SCOPE_GLOBAL
)

// TestMayResolveMatrix ports approver-rule.test.ts's "mayResolve matrix"
// case by case, against real roles in Postgres.
func TestMayResolveMatrix(t *testing.T) {
	t.Parallel()
	pool := fixture(t)
	type c struct {
		clicker string
		want    bool
	}
	cases := []struct {
		name  string
		rule  *guardv1.ApproverRule
		scope guardv1.ApproverScope
		want  []c
	}{
		{"exclusive: only the named user, regardless of rank", exclusive(deliveree), group,
			[]c{{deliveree, true}, {owner, false}, {globalAdmin, false}, {scopedAdmin, false}, {rando, false}, {"", false}}},
		{"exclusive ∩ global scope: a named user without rank", exclusive(deliveree), global, []c{{deliveree, false}}},
		{"exclusive ∩ global scope: named owner", exclusive(owner), global, []c{{owner, true}}},
		{"exclusive ∩ global scope: named global admin", exclusive(globalAdmin), global, []c{{globalAdmin, true}}},
		{"admins-of-scope(group) with a delivered approver: named-or-admin", adminsOf("ag-1", deliveree), group,
			[]c{{deliveree, true}, {scopedAdmin, true}, {globalAdmin, true}, {owner, true}, {otherAdmin, false}, {rando, false}, {"", false}}},
		{"admins-of-scope(group) without a delivered approver: pure admin chain", adminsOf("ag-1", ""), group,
			[]c{{scopedAdmin, true}, {globalAdmin, true}, {owner, true}, {deliveree, false}, {otherAdmin, false}}},
		{"admins-of-scope(null): owners and global admins only", adminsOf("", ""), group,
			[]c{{owner, true}, {globalAdmin, true}, {scopedAdmin, false}, {rando, false}}},
		{"admins-of-scope(null) with a delivered approver keeps the delivered-to shortcut", adminsOf("", deliveree), group,
			[]c{{deliveree, true}, {scopedAdmin, false}}},
		{"D1 overlay: global scope rejects everyone below owner/global admin", adminsOf("ag-1", deliveree), global,
			[]c{{scopedAdmin, false}, {deliveree, false}, {otherAdmin, false}, {owner, true}, {globalAdmin, true}}},
		{"an unspecified scope is the seed's default, group", adminsOf("ag-1", ""), guardv1.ApproverScope_APPROVER_SCOPE_UNSPECIFIED,
			[]c{{scopedAdmin, true}, {otherAdmin, false}}},
		{"an empty rule resolves for nobody", &guardv1.ApproverRule{}, group, []c{{owner, false}}},
		{"a nil rule resolves for nobody", nil, group, []c{{owner, false}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, cl := range tc.want {
				got, err := approvals.MayResolve(context.Background(), pool, tc.rule, tc.scope, cl.clicker)
				if err != nil {
					t.Fatal(err)
				}
				if got != cl.want {
					t.Errorf("mayResolve(%q) = %v, want %v", cl.clicker, got, cl.want)
				}
			}
		})
	}
}

// TestRuleOfRow ports "approverRuleOf maps row columns onto the rule": the
// rule a stored hold reads back as.
func TestRuleOfRow(t *testing.T) {
	t.Parallel()
	pool := fixture(t)
	exec(t, pool, `INSERT INTO holds (id, kind, agent_group_id, approver_rule, approver_user_id) VALUES
		('h-excl', 'k', 'ag-1', 'exclusive', $1),
		('h-deliv', 'k', 'ag-1', 'admins-of-scope', $1),
		('h-chain', 'k', 'ag-1', 'admins-of-scope', NULL)`, deliveree)
	for id, want := range map[string]*guardv1.ApproverRule{
		"h-excl":  exclusive(deliveree),
		"h-deliv": adminsOf("ag-1", deliveree),
		"h-chain": adminsOf("ag-1", ""),
	} {
		h, err := approvals.GetHold(context.Background(), pool, id)
		if err != nil {
			t.Fatal(err)
		}
		if h.GetApproverRule().String() != want.String() {
			t.Errorf("%s: rule %v, want %v", id, h.GetApproverRule(), want)
		}
	}
	// The malformed exclusive row (no named user) is refused by the schema
	// (0002's holds_exclusive_has_approver), so it can never brick a hold.
	if _, err := pool.Exec(context.Background(), `INSERT INTO holds (id, kind, approver_rule) VALUES ('h-bad', 'k', 'exclusive')`); err == nil {
		t.Fatal("an exclusive hold without a named approver was stored")
	}
}

// An exclusive rule naming several users (a message policy's quorum): each
// named user may click, nobody else — owners included — and the global
// overlay still applies to each.
func TestMayResolveExclusiveWithFurtherNamedUsers(t *testing.T) {
	rule := &guardv1.ApproverRule{Kind: &guardv1.ApproverRule_Exclusive{Exclusive: &guardv1.ExclusiveApprover{
		UserId: deliveree, AlsoUserIds: []string{rando, ""}}}}
	none := approvals.Roles{AdminOf: map[string]bool{}}
	ownerRoles := approvals.Roles{Owner: true, AdminOf: map[string]bool{}}
	for _, c := range []struct {
		clicker string
		roles   approvals.Roles
		scope   guardv1.ApproverScope
		want    bool
	}{
		{deliveree, none, group, true},
		{rando, none, group, true},
		{owner, ownerRoles, group, false},
		{"", none, group, false},
		{rando, none, global, false},
		{rando, ownerRoles, global, true},
	} {
		if got := approvals.MayResolveWithRoles(rule, c.scope, c.clicker, c.roles); got != c.want {
			t.Errorf("%q scope %v: %v, want %v", c.clicker, c.scope, got, c.want)
		}
	}
}
