package migrations_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/clawguard/clawguard/migrations"
	"github.com/clawguard/clawguard/migrations/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func pool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func TestApplyTwiceIsNoop(t *testing.T) {
	ctx := context.Background()
	db := pool(t, pgtest.NewEmptyDB(t))
	first, err := migrations.Apply(ctx, db, 0)
	if err != nil {
		t.Fatal(err)
	}
	if first.From != 0 || first.To != migrations.Latest() || len(first.Applied) == 0 {
		t.Fatalf("first apply = %+v", first)
	}
	second, err := migrations.Apply(ctx, db, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(second.Applied) != 0 || second.From != migrations.Latest() {
		t.Fatalf("second apply should be a no-op, got %+v", second)
	}
}

func TestConcurrentReplicasApplyOnce(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewEmptyDB(t)
	const replicas = 4
	var wg sync.WaitGroup
	results := make([]migrations.Result, replicas)
	errs := make([]error, replicas)
	for i := range replicas {
		p := pool(t, url)
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = migrations.Apply(ctx, p, 0)
		}()
	}
	wg.Wait()
	applied := 0
	for i := range replicas {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		applied += len(results[i].Applied)
	}
	all, _ := migrations.All()
	if applied != len(all) {
		t.Fatalf("migrations applied %d times in total, want exactly %d", applied, len(all))
	}
	var rows int
	if err := pool(t, url).QueryRow(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != len(all) {
		t.Fatalf("schema_migrations has %d rows, want %d", rows, len(all))
	}
}

func TestRefusesNewerDatabase(t *testing.T) {
	ctx := context.Background()
	db := pool(t, pgtest.NewDB(t))
	if _, err := db.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES (9999, 'from_the_future')`); err != nil {
		t.Fatal(err)
	}
	_, err := migrations.Apply(ctx, db, 0)
	if !errors.Is(err, migrations.ErrDatabaseNewer) {
		t.Fatalf("want ErrDatabaseNewer, got %v", err)
	}
}

// The seed's migration-019 upgrade test: holds written by the pre-contract
// schema come out of 0002 with the approver rule the old click-auth gave them.
func TestHoldApproverRuleBackfill(t *testing.T) {
	ctx := context.Background()
	db := pool(t, pgtest.NewEmptyDB(t))
	if _, err := migrations.Apply(ctx, db, 1); err != nil {
		t.Fatal(err)
	}
	seed := []string{
		`INSERT INTO agent_groups (id, name) VALUES ('ag-1', 'One')`,
		`INSERT INTO sessions (id, agent_group_id) VALUES ('sess-1', 'ag-1')`,
		// Legacy a2a hold: a named approver means it was exclusive.
		`INSERT INTO holds (id, kind, session_id, approver_user_id) VALUES ('appr-a2a', 'a2a_message_gate', 'sess-1', 'tg:dana')`,
		// Legacy cli hold: no approver, no anchor; click-auth fell back to the session's group.
		`INSERT INTO holds (id, kind, session_id) VALUES ('appr-cli', 'cli_command', 'sess-1')`,
		// Legacy credential hold: sessionless, anchor already stamped.
		`INSERT INTO holds (id, kind, agent_group_id) VALUES ('oa-1', 'onecli_credential', 'ag-1')`,
	}
	for _, q := range seed {
		if _, err := db.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := migrations.Apply(ctx, db, 0); err != nil {
		t.Fatal(err)
	}
	type row struct {
		rule, scope, group string
		swept              bool
	}
	got := map[string]row{}
	rows, err := db.Query(ctx, `SELECT id, approver_rule, approver_scope, COALESCE(agent_group_id, ''), swept_on_restart FROM holds`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var r row
		if err := rows.Scan(&id, &r.rule, &r.scope, &r.group, &r.swept); err != nil {
			t.Fatal(err)
		}
		got[id] = r
	}
	want := map[string]row{
		"appr-a2a": {"exclusive", "group", "ag-1", false},
		"appr-cli": {"admins-of-scope", "group", "ag-1", false},
		"oa-1":     {"admins-of-scope", "group", "ag-1", true},
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("hold %s = %+v, want %+v", id, got[id], w)
		}
	}
	// The contract's new invariant holds for carried rows: one live hold per dedup key.
	if _, err := db.Exec(ctx, `UPDATE holds SET dedup_key = 'k' WHERE id IN ('appr-a2a', 'appr-cli')`); err == nil {
		t.Fatal("two live holds with one dedup key must be refused")
	}
}

// A migration numbered below the highest applied one (written in parallel)
// is still applied; the server is not "current" until it is.
func TestAppliesMissingLowerVersion(t *testing.T) {
	ctx := context.Background()
	db := pool(t, pgtest.NewDB(t))
	if ok, err := migrations.Current(ctx, db); err != nil || !ok {
		t.Fatalf("fresh template should be current: %v %v", ok, err)
	}
	if _, err := db.Exec(ctx, `DROP INDEX holds_undispatched_idx; ALTER TABLE holds DROP COLUMN dispatched_at;
		DELETE FROM schema_migrations WHERE version = 21`); err != nil {
		t.Fatal(err)
	}
	if ok, _ := migrations.Current(ctx, db); ok {
		t.Fatal("a database missing migration 21 must not be current")
	}
	res, err := migrations.Apply(ctx, db, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Applied) != 1 || res.Applied[0].Version != 21 {
		t.Fatalf("want exactly 0021 re-applied, got %+v", res.Applied)
	}
	if ok, _ := migrations.Current(ctx, db); !ok {
		t.Fatal("not current after applying the missing migration")
	}
}

// 0110 moves carried holds' dedup keys into the server's namespace (kind /
// anchor group / session / key), the shape CreateHoldTx now stores: a
// pending hold keeps deduplicating its own flow after the upgrade, and an
// approved sender_admit is still found by its key.
func TestHoldDedupKeysNamespacedOnUpgrade(t *testing.T) {
	ctx := context.Background()
	db := pool(t, pgtest.NewEmptyDB(t))
	if _, err := migrations.Apply(ctx, db, 109); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO agent_groups (id, name) VALUES ('ag-1', 'One')`,
		`INSERT INTO sessions (id, agent_group_id) VALUES ('sess-1', 'ag-1')`,
		`INSERT INTO holds (id, kind, agent_group_id, dedup_key) VALUES ('h-admit', 'sender_admit', 'ag-1', 'sender_admit:mg-1:tg:bob')`,
		`INSERT INTO holds (id, kind, agent_group_id, session_id, dedup_key) VALUES ('h-runner', 'install_packages', 'ag-1', 'sess-1', 'sender_admit:mg-1:tg:eve')`,
		`INSERT INTO holds (id, kind, dedup_key) VALUES ('h-req', 'onecli_credential', 'request/onecli_credential/k')`,
		`INSERT INTO holds (id, kind) VALUES ('h-none', 'cli_command')`,
	} {
		if _, err := db.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := migrations.Apply(ctx, db, 0); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"h-admit":  "sender_admit/ag-1//sender_admit:mg-1:tg:bob",
		"h-runner": "install_packages/ag-1/sess-1/sender_admit:mg-1:tg:eve",
		"h-req":    "onecli_credential///request/onecli_credential/k",
		"h-none":   "",
	}
	for id, w := range want {
		var got string
		if err := db.QueryRow(ctx, `SELECT COALESCE(dedup_key, '') FROM holds WHERE id = $1`, id).Scan(&got); err != nil || got != w {
			t.Errorf("hold %s dedup key = %q (%v), want %q", id, got, err, w)
		}
	}
}

// 0120 carries in-flight holds into grant binding: a consumed grant is
// consumed by its grant ALLOW (and applied if that ALLOW was cited), and a
// carried a2a hold records its payload's target as the decided resource.
func TestGrantBindingCarriesInFlightHolds(t *testing.T) {
	ctx := context.Background()
	db := pool(t, pgtest.NewEmptyDB(t))
	if _, err := migrations.Apply(ctx, db, 119); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO agent_groups (id, name) VALUES ('ag-1', 'One'), ('ag-2', 'Two')`,
		`INSERT INTO sessions (id, agent_group_id) VALUES ('sess-1', 'ag-1')`,
		`INSERT INTO holds (id, kind, agent_group_id, session_id, payload, status, resolved_at, consumed_at)
		 VALUES ('h-applied', 'install_packages', 'ag-1', 'sess-1', '{"apt":["curl"]}', 'approved', now(), now()),
		        ('h-inflight', 'a2a_message_gate', 'ag-1', 'sess-1', '{"to":"ag-2","text":"hi"}', 'approved', now(), now()),
		        ('h-pending', 'a2a_message_gate', 'ag-1', 'sess-1', '{"platform_id":"ag-2"}', 'pending', NULL, NULL)`,
		`INSERT INTO decisions (id, action, actor, actor_kind, session_id, effect, decided_by, grant_id, cited_at) VALUES
		 ('dec-self', 'a2a.send', '{}', 'agent', 'sess-1', 'allow', 'baseline', 'h-inflight', NULL),
		 ('dec-a', 'self_mod.install_packages', '{}', 'agent', 'sess-1', 'allow', 'grant', 'h-applied', now()),
		 ('dec-b', 'a2a.send', '{}', 'agent', 'sess-1', 'allow', 'grant', 'h-inflight', NULL)`,
	} {
		if _, err := db.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := migrations.Apply(ctx, db, 0); err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		by, to  string
		applied bool
	}{
		"h-applied":  {"dec-a", "", true},
		"h-inflight": {"dec-b", "ag-2", false},
		"h-pending":  {"", "ag-2", false},
	}
	for id, w := range want {
		var (
			by, to  string
			applied bool
		)
		if err := db.QueryRow(ctx, `SELECT COALESCE(consumed_by, ''), COALESCE(resource->>'to', ''), applied_at IS NOT NULL FROM holds WHERE id = $1`, id).
			Scan(&by, &to, &applied); err != nil || by != w.by || to != w.to || applied != w.applied {
			t.Errorf("hold %s: consumed_by %q, resource.to %q, applied %v (%v); want %+v", id, by, to, applied, err, w)
		}
	}
}
