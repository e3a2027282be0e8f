package approvals_test

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/config"
	"github.com/clawguard/clawguard/server/internal/metrics"
)

func create(t *testing.T, svc *approvals.Service, pool *pgxpool.Pool, req approvals.CreateRequest) approvals.CreateResult {
	t.Helper()
	var res approvals.CreateResult
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		var err error
		res, err = svc.CreateHoldTx(context.Background(), tx, req)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCreatePicksApproverAndDelivery(t *testing.T) {
	t.Parallel()
	pool := fixture(t)
	svc := newService(t, pool)
	// Nobody has a DM: the hold exists, undelivered.
	res := create(t, svc, pool, approvals.CreateRequest{Kind: "install_packages", AgentGroupID: "ag-1", Rule: adminsOf("ag-1", ""), Title: "t"})
	if !res.Created || !res.Undelivered || res.Hold.GetDeliveredTo() != "" || res.Hold.GetStatus() != guardv1.HoldStatus_HOLD_STATUS_PENDING {
		t.Fatalf("undelivered hold: %+v", res)
	}
	if n := count(t, pool, `SELECT count(*) FROM hold_events WHERE hold_id = $1 AND type = 'requested' AND undelivered`, res.Hold.GetId()); n != 1 {
		t.Fatalf("requested events marked undelivered: %d", n)
	}
	// Default TTL applies.
	if exp := res.Hold.GetExpiresAt().AsTime(); exp.Before(time.Now().Add(71*time.Hour)) || exp.After(time.Now().Add(73*time.Hour)) {
		t.Fatalf("default TTL: expires %v", exp)
	}
	if len(res.Hold.GetOptions()) != 3 {
		t.Fatalf("default options: %v", res.Hold.GetOptions())
	}

	// DMs: owner on telegram, global admin and scoped admin on slack.
	exec(t, pool, `INSERT INTO user_dms (user_id, channel_type, address) VALUES ($1, 'telegram', 'o'), ($2, 'slack', 'g'), ($3, 'slack', 's')`, owner, globalAdmin, scopedAdmin)
	cases := []struct {
		name   string
		req    approvals.CreateRequest
		want   string
		record bool
	}{
		{"scoped admin first", approvals.CreateRequest{AgentGroupID: "ag-1"}, scopedAdmin, false},
		{"origin channel preferred", approvals.CreateRequest{AgentGroupID: "ag-1", OriginChannel: "telegram"}, owner, false},
		{"no anchor: global admins then owners", approvals.CreateRequest{}, globalAdmin, false},
		{"another group's admins are not candidates", approvals.CreateRequest{AgentGroupID: "ag-2"}, globalAdmin, false},
		{"global scope skips scoped admins", approvals.CreateRequest{AgentGroupID: "ag-1", Scope: global}, globalAdmin, false},
		{"exclusive goes to that user", approvals.CreateRequest{AgentGroupID: "ag-1", Rule: exclusive(owner)}, owner, false},
		{"delivered-to recorded", approvals.CreateRequest{AgentGroupID: "ag-1", RecordDeliveredTo: true}, scopedAdmin, true},
		{"a named delivered-to user comes first", approvals.CreateRequest{AgentGroupID: "ag-1", Rule: adminsOf("ag-1", owner)}, owner, true},
		{"global: a named owner comes first", approvals.CreateRequest{AgentGroupID: "ag-1", Rule: adminsOf("ag-1", owner), Scope: global}, owner, true},
	}
	for _, tc := range cases {
		tc.req.Kind = "sender_admit"
		res := create(t, svc, pool, tc.req)
		if !res.Created || res.Undelivered || res.Hold.GetDeliveredTo() != tc.want {
			t.Errorf("%s: delivered to %q (undelivered %v), want %q", tc.name, res.Hold.GetDeliveredTo(), res.Undelivered, tc.want)
			continue
		}
		a := res.Hold.GetApproverRule().GetAdminsOfScope()
		if tc.record != (a.GetDeliveredTo() == tc.want) {
			t.Errorf("%s: rule %v, record delivered-to %v", tc.name, res.Hold.GetApproverRule(), tc.record)
		}
	}
}

func TestCreateWithoutEligibleApproverMakesNoHold(t *testing.T) {
	t.Parallel()
	pool := noUsersFixture(t)
	svc := newService(t, pool)
	res := create(t, svc, pool, approvals.CreateRequest{Kind: "create_agent", AgentGroupID: "ag-1"})
	if res.Created || !res.NoApprover || res.Hold != nil || res.Reason == "" {
		t.Fatalf("want NoApprover with a reason, got %+v", res)
	}
	// Global scope needs an owner or global admin: a scoped admin is not enough.
	exec(t, pool, `INSERT INTO users (id) VALUES ('slack:a')`)
	exec(t, pool, `INSERT INTO user_roles (user_id, role, agent_group_id) VALUES ('slack:a', 'admin', 'ag-1')`)
	res = create(t, svc, pool, approvals.CreateRequest{Kind: "cli_command", AgentGroupID: "ag-1", Scope: global})
	if !res.NoApprover {
		t.Fatalf("global hold with only a scoped admin: %+v", res)
	}
	res = create(t, svc, pool, approvals.CreateRequest{Kind: "cli_command", AgentGroupID: "ag-1", Rule: exclusive("slack:a"), Scope: global})
	if !res.NoApprover {
		t.Fatalf("exclusive global hold naming a scoped admin: %+v", res)
	}
	res = create(t, svc, pool, approvals.CreateRequest{Kind: "cli_command", AgentGroupID: "ag-1", Rule: adminsOf("ag-1", "slack:a"), Scope: global})
	if !res.NoApprover {
		t.Fatalf("global hold naming a scoped admin as delivered-to: %+v", res)
	}
	if n := count(t, pool, `SELECT count(*) FROM holds`); n != 0 {
		t.Fatalf("%d holds created without an eligible approver", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM hold_events`); n != 0 {
		t.Fatalf("%d events without a hold", n)
	}
}

// noUsersFixture is a database with the two groups and no users.
func noUsersFixture(t *testing.T) *pgxpool.Pool {
	pool := fixture(t)
	exec(t, pool, `DELETE FROM users`)
	return pool
}

func TestCreateDedupsOnLiveKey(t *testing.T) {
	t.Parallel()
	pool := fixture(t)
	svc := newService(t, pool)
	req := approvals.CreateRequest{Kind: "sender_admit", AgentGroupID: "ag-1", DedupKey: "sender_admit:mg-1:telegram:bob", RecordDeliveredTo: true}
	first := create(t, svc, pool, req)
	second := create(t, svc, pool, req)
	if !first.Created || second.Created || second.Hold.GetId() != first.Hold.GetId() {
		t.Fatalf("second request with a live key: created=%v id=%s, first %s", second.Created, second.Hold.GetId(), first.Hold.GetId())
	}
	if n := count(t, pool, `SELECT count(*) FROM holds WHERE dedup_key = $1`, "sender_admit/ag-1//sender_admit:mg-1:telegram:bob"); n != 1 {
		t.Fatalf("%d holds with the namespaced key", n)
	}
	// The same caller key under another kind or anchor is another hold:
	// a key never reaches outside its own kind, group and session.
	for _, other := range []approvals.CreateRequest{
		{Kind: "onecli_credential", AgentGroupID: "ag-1", DedupKey: req.DedupKey},
		{Kind: "sender_admit", AgentGroupID: "ag-2", DedupKey: req.DedupKey},
	} {
		if res := create(t, svc, pool, other); !res.Created || res.Hold.GetId() == first.Hold.GetId() {
			t.Fatalf("key of kind %s / group %s captured the first hold: %+v", other.Kind, other.AgentGroupID, res)
		}
	}
	if n := count(t, pool, `SELECT count(*) FROM hold_events WHERE hold_id = $1`, first.Hold.GetId()); n != 1 {
		t.Fatalf("%d events, want one requested", n)
	}

	// A key whose hold has expired (not yet swept) no longer dedups: the
	// stale one is expired (with its event) and a new one is created.
	exec(t, pool, `UPDATE holds SET expires_at = now() - interval '1 second' WHERE id = $1`, first.Hold.GetId())
	third := create(t, svc, pool, req)
	if !third.Created || third.Hold.GetId() == first.Hold.GetId() {
		t.Fatalf("expired key still dedups: %+v", third)
	}
	if n := count(t, pool, `SELECT count(*) FROM hold_events WHERE hold_id = $1 AND outcome = 'expire'`, first.Hold.GetId()); n != 1 {
		t.Fatalf("stale hold's expire events: %d", n)
	}

	// Concurrent requests with one key: one hold.
	req.DedupKey = "concurrent"
	ids := make(chan string, 8)
	for range 8 {
		go func() {
			var res approvals.CreateResult
			err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
				var err error
				res, err = svc.CreateHoldTx(context.Background(), tx, req)
				return err
			})
			if err != nil {
				t.Error(err)
				ids <- ""
				return
			}
			ids <- res.Hold.GetId()
		}()
	}
	seen := map[string]bool{}
	for range 8 {
		seen[<-ids] = true
	}
	if len(seen) != 1 || seen[""] {
		t.Fatalf("concurrent requests made holds %v", seen)
	}
}

func TestCreateFromSessionTakesGroupAndOrigin(t *testing.T) {
	t.Parallel()
	pool := fixture(t)
	svc := newService(t, pool)
	exec(t, pool, `INSERT INTO messaging_groups (id, channel_type, platform_id) VALUES ('mg-1', 'telegram', 'chat')`)
	exec(t, pool, `INSERT INTO sessions (id, agent_group_id, messaging_group_id) VALUES ('sess-1', 'ag-1', 'mg-1')`)
	exec(t, pool, `INSERT INTO user_dms (user_id, channel_type, address) VALUES ($1, 'telegram', 'o'), ($2, 'slack', 's')`, owner, scopedAdmin)
	res := create(t, svc, pool, approvals.CreateRequest{Kind: "install_packages", SessionID: "sess-1", DeliveryAction: "install_packages",
		Requester: &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: "ag-1", SessionId: "sess-1"}}}})
	h := res.Hold
	if h.GetAgentGroupId() != "ag-1" || h.GetOriginChannelType() != "telegram" || h.GetDeliveredTo() != owner || h.GetSessionId() != "sess-1" {
		t.Fatalf("hold from session: %v", h)
	}
	if h.GetRequester().GetAgent().GetSessionId() != "sess-1" || h.GetDeliveryAction() != "install_packages" {
		t.Fatalf("requester/delivery action not stored: %v", h)
	}
	ok, err := approvals.MayResolve(context.Background(), pool, h.GetApproverRule(), h.GetApproverScope(), scopedAdmin)
	if err != nil || !ok {
		t.Fatalf("scoped admin of the session's group may resolve: %v %v", ok, err)
	}
}

// TestMetrics: created and resolved holds are counted; the pending gauges
// come from the table (so every replica reports the same).
func TestMetrics(t *testing.T) {
	t.Parallel()
	pool := fixture(t)
	m := metrics.NewMetrics(prometheus.NewRegistry())
	svc := approvals.New(pool, m, slog.New(slog.NewTextHandler(io.Discard, nil)), config.Default())
	for range 2 {
		create(t, svc, pool, approvals.CreateRequest{Kind: "create_agent", AgentGroupID: "ag-1"})
	}
	old := create(t, svc, pool, approvals.CreateRequest{Kind: "sender_admit", AgentGroupID: "ag-1"})
	exec(t, pool, `UPDATE holds SET created_at = now() - interval '1 hour', expires_at = now() - interval '1 second' WHERE id = $1`, old.Hold.GetId())
	if err := svc.RefreshGauges(context.Background()); err != nil {
		t.Fatal(err)
	}
	if g, o := testutil.ToFloat64(m.HoldsPending.WithLabelValues("create_agent")), testutil.ToFloat64(m.OldestPendingHoldSeconds); g != 2 || o < 3600 || o > 3700 {
		t.Fatalf("pending create_agent %v, oldest %v s", g, o)
	}
	if n, err := svc.ExpireDue(context.Background()); err != nil || n != 1 {
		t.Fatalf("ExpireDue: %d %v", n, err)
	}
	if err := svc.RefreshGauges(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c, r, g := testutil.ToFloat64(m.HoldsCreatedTotal.WithLabelValues("create_agent")),
		testutil.ToFloat64(m.HoldsResolvedTotal.WithLabelValues("sender_admit", "expire")),
		testutil.ToFloat64(m.HoldsPending.WithLabelValues("sender_admit")); c != 2 || r != 1 || g != 0 {
		t.Fatalf("created %v, resolved expire %v, pending sender_admit %v", c, r, g)
	}
}

// Issue 32, "ids instead of names": a card the runner wrote with its
// groups' generated ids is stored with their names, so the console, ncl,
// the chat cards and the webhook all read names; the hold keeps the id.
func TestACardsGroupIDsAreStoredAsNames(t *testing.T) {
	t.Parallel()
	pool := fixture(t)
	exec(t, pool, `INSERT INTO agent_groups (id, name) VALUES ('ag_5f44f5b6ed84603d', 'research'), ('ag_a5d2b80e5cee4fbe', 'ops')`)
	svc := approvals.New(pool, metrics.NewMetrics(prometheus.NewRegistry()), slog.New(slog.NewTextHandler(io.Discard, nil)), config.Default())
	res := create(t, svc, pool, approvals.CreateRequest{Kind: "a2a_message_gate", AgentGroupID: "ag_5f44f5b6ed84603d",
		Title: "Message approval", Question: "Agent group ag_5f44f5b6ed84603d wants to send a message to ag_a5d2b80e5cee4fbe (and ag_0000000000000000):\n\nhello"})
	h := res.Hold
	if want := "Agent group research wants to send a message to ops (and ag_0000000000000000):\n\nhello"; h.GetQuestion() != want {
		t.Fatalf("question %q, want %q", h.GetQuestion(), want)
	}
	if h.GetAgentGroupId() != "ag_5f44f5b6ed84603d" {
		t.Fatalf("the hold's group is %q, want the id", h.GetAgentGroupId())
	}
}

// Issue 41 item 3: the approver reads the agent's text verbatim. The card's
// own words name the groups; an id inside the message (as written, cut
// short, quoted or inside a command's JSON) stays the id that will be sent.
func TestTheAgentsOwnWordsKeepTheirIDs(t *testing.T) {
	t.Parallel()
	pool := fixture(t)
	exec(t, pool, `INSERT INTO agent_groups (id, name) VALUES ('ag_be2c152eff86f4a2', 'demo'), ('ag_a5d2b80e5cee4fbe', 'helper')`)
	svc := newService(t, pool)
	const demo, helper = "ag_be2c152eff86f4a2", "ag_a5d2b80e5cee4fbe"
	text := "hello helper, this is " + demo + ` (say "` + helper + `")`
	payload, _ := structpb.NewStruct(map[string]any{"to": helper, "text": text})
	res := create(t, svc, pool, approvals.CreateRequest{Kind: "a2a_message_gate", AgentGroupID: demo, Payload: payload,
		Resource: map[string]string{"from": demo, "to": helper}, Title: "Message approval",
		Question: "Agent group " + demo + " wants to send a message to " + helper + ":\n\n" + text +
			"\n\nclipped: " + text[:len(text)-5] + "…\nquoted: " + strconv.Quote(text)})
	q := res.Hold.GetQuestion()
	if !strings.HasPrefix(q, "Agent group demo wants to send a message to helper:\n\n") {
		t.Errorf("the card's own words do not name the groups: %q", q)
	}
	for _, shown := range []string{"\n\n" + text + "\n\n", "clipped: " + text[:len(text)-5] + "…", "quoted: " + strconv.Quote(text)} {
		if !strings.Contains(q, shown) {
			t.Errorf("the agent's text is not shown verbatim (%q):\n%s", shown, q)
		}
	}
	if strings.Contains(q, "this is demo") {
		t.Errorf("a name was put inside the agent's text: %q", q)
	}
	// A held command: its JSON keeps an id an argument carries, the frame
	// names the caller's group.
	req, _ := structpb.NewStruct(map[string]any{"group": demo, "name": "ops for " + helper})
	cmd, _ := structpb.NewStruct(map[string]any{"method": guardv1.Registry_AddDestination_FullMethodName})
	cmd.Fields["request"] = structpb.NewStructValue(req)
	res = create(t, svc, pool, approvals.CreateRequest{Kind: "cli_command", AgentGroupID: demo, Payload: cmd, Title: "CLI: destinations.add",
		Question: `Agent group "` + demo + `" wants to run:` + "\n`ncl destinations add {\"group\":\"" + demo + `","name":"ops for ` + helper + "\"}`"})
	if q := res.Hold.GetQuestion(); !strings.HasPrefix(q, `Agent group "demo" wants to run:`) || !strings.Contains(q, `"name":"ops for `+helper+`"`) {
		t.Errorf("command card: %q", q)
	}
}
