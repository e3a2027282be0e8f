package snapshot_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/clawguard/clawguard/migrations/pgtest"
	"github.com/clawguard/clawguard/server/internal/app"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/listener"
	"github.com/clawguard/clawguard/server/internal/snapshot"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

var ctx = context.Background()

func specs(t *testing.T) []guard.TableSpec {
	t.Helper()
	cat, err := app.BuildCatalog()
	if err != nil {
		t.Fatal(err)
	}
	return cat.Tables()
}

func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(ctx, pgtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// refreshes counts catch-ups by kind.
type refreshes struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *refreshes) record(kind string, _ int64, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[string]int{}
	}
	r.n[kind]++
}

func (r *refreshes) get(kind string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[kind]
}

// dump is a copy's every table as sorted "key → rows" lines.
func dump(sp []guard.TableSpec, ft *guard.FactTables) map[string][]string {
	out := map[string][]string{}
	for t, s := range sp {
		lines := []string{}
		ft.Each(t, func(key string, rows [][]*string) {
			var rs []string
			for _, r := range rows {
				vals := make([]string, len(r))
				for i, v := range r {
					vals[i] = "NULL"
					if v != nil {
						vals[i] = *v
					}
				}
				rs = append(rs, "("+strings.Join(vals, ",")+")")
			}
			sort.Strings(rs)
			lines = append(lines, strings.ReplaceAll(key, guard.KeySep, "|")+" → "+strings.Join(rs, " "))
		})
		sort.Strings(lines)
		out[s.Name] = lines
	}
	return out
}

func dbRevision(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	var rev int64
	if err := pool.QueryRow(ctx, `SELECT rev FROM fact_revision`).Scan(&rev); err != nil {
		t.Fatal(err)
	}
	return rev
}

// assertExact checks s against a copy loaded whole from the database now.
func assertExact(t *testing.T, pool *pgxpool.Pool, sp []guard.TableSpec, s *snapshot.Snapshot, step string) {
	t.Helper()
	fresh := snapshot.New(pool, sp, snapshot.Options{})
	if err := fresh.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := s.Revision(), dbRevision(t, pool); got != want {
		t.Fatalf("after %s: the copy is at revision %d, the database at %d", step, got, want)
	}
	if got, want := dump(sp, s.Tables()), dump(sp, fresh.Tables()); !reflect.DeepEqual(got, want) {
		t.Fatalf("after %s: the caught-up copy differs from a fresh load\n got: %v\nwant: %v", step, got, want)
	}
}

// TestCopyFollowsEveryChange: after each kind of change to every mirrored
// table — inserts, updates that move a key, deletes, cascades, NULL keys,
// several rows under one key, TRUNCATE — a catch-up leaves the copy equal
// to a fresh load at the database's revision, by re-reading only what
// changed.
func TestCopyFollowsEveryChange(t *testing.T) {
	pool := newPool(t)
	sp := specs(t)
	rec := &refreshes{}
	s := snapshot.New(pool, sp, snapshot.Options{OnRefresh: rec.record})
	if err := s.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	steps := []struct{ name, sql string }{
		{"groups and their configs", `INSERT INTO agent_groups (id, name) VALUES ('g1', 'one'), ('g2', 'two'), ('g3', 'three');
			INSERT INTO container_configs (agent_group_id, cli_scope) VALUES ('g1', 'global'), ('g2', 'disabled')`},
		{"destinations, two names for one target", `INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id)
			VALUES ('g1', 'b', 'g2'), ('g1', 'b-again', 'g2'), ('g2', 'c', 'g3')`},
		{"a destination to a chat (NULL target)", `INSERT INTO messaging_groups (id, channel_type, platform_id) VALUES ('mg1', 'telegram', '1');
			INSERT INTO agent_destinations (agent_group_id, name, target_messaging_group_id) VALUES ('g3', 'chat', 'mg1')`},
		{"a policy with several approvers", `INSERT INTO agent_message_policies (from_agent_group_id, to_agent_group_id, approver_user_id, also_approvers, approvals, mode)
			VALUES ('g1', 'g2', 'telegram:dana', '{telegram:eve,telegram:fay}', 2, 'warn')`},
		{"action settings", `INSERT INTO action_settings (action, mode, approvals) VALUES ('a2a.send', 'audit', 0), ('agents.create', 'warn', 2)`},
		{"sessions", `INSERT INTO runners (id) VALUES ('r1'), ('r2');
			INSERT INTO sessions (id, agent_group_id, runner_id) VALUES ('s1', 'g1', 'r1'), ('s2', 'g2', NULL)`},
		{"a session moves", `UPDATE sessions SET runner_id = 'r2' WHERE id = 's1'`},
		{"a destination re-targeted (its key moves)", `UPDATE agent_destinations SET target_agent_group_id = 'g3' WHERE agent_group_id = 'g1' AND name = 'b'`},
		{"a policy changes its approvers", `UPDATE agent_message_policies SET also_approvers = '{}', approvals = 0, mode = '' WHERE from_agent_group_id = 'g1'`},
		{"a config changes scope", `UPDATE container_configs SET cli_scope = 'group' WHERE agent_group_id = 'g1'`},
		{"one of two rows of a key deleted", `DELETE FROM agent_destinations WHERE agent_group_id = 'g1' AND name = 'b-again'`},
		{"a runner deleted (sessions set NULL)", `DELETE FROM runners WHERE id = 'r2'`},
		{"a group deleted (cascades)", `DELETE FROM agent_groups WHERE id = 'g2'`},
		{"action settings truncated", `TRUNCATE action_settings`},
		{"a bulk load (the table is read whole)", `INSERT INTO agent_groups (id, name) SELECT 'bulk' || i, 'bulk' || i FROM generate_series(1, 1500) i;
			INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) SELECT 'bulk' || i, 'to-g1', 'g1' FROM generate_series(1, 1500) i`},
		{"a bulk delete, one key kept", `DELETE FROM agent_groups WHERE id LIKE 'bulk%' AND id <> 'bulk7'`},
		{"everything in one transaction", `INSERT INTO agent_groups (id, name) VALUES ('g4', 'four');
			INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) VALUES ('g4', 'x', 'g1');
			UPDATE sessions SET agent_group_id = 'g4' WHERE id = 's1';
			DELETE FROM container_configs WHERE agent_group_id = 'g1'`},
	}
	for _, st := range steps {
		before := dbRevision(t, pool)
		pgtest.Exec(t, pool, "BEGIN; "+st.sql+"; COMMIT")
		if after := dbRevision(t, pool); after != before+1 {
			t.Fatalf("%s: fact_revision %d → %d, want one bump per transaction", st.name, before, after)
		}
		if err := s.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		assertExact(t, pool, sp, s, st.name)
	}
	if n := rec.get("full"); n != 1 {
		t.Errorf("%d full loads, want only the first (every later catch-up re-reads the changed keys)", n)
	}
	if n := rec.get("delta"); n != len(steps) {
		t.Errorf("%d delta catch-ups, want %d", n, len(steps))
	}
}

// TestUnmirroredChangesBumpNothing: what no lookup reads moves no revision,
// so a busy unrelated column (a session's last activity) costs decisions
// nothing.
func TestUnmirroredChangesBumpNothing(t *testing.T) {
	pool := newPool(t)
	pgtest.Exec(t, pool, `INSERT INTO agent_groups (id, name) VALUES ('g1', 'one');
		INSERT INTO sessions (id, agent_group_id) VALUES ('s1', 'g1');
		INSERT INTO container_configs (agent_group_id) VALUES ('g1')`)
	before := dbRevision(t, pool)
	for _, sql := range []string{
		`UPDATE sessions SET last_active_at = now(), status = 'stopped'`,
		`UPDATE agent_groups SET base_image = 'debian', pinned_host = 'h1'`,
		`UPDATE container_configs SET apt_packages = '{curl}', version = version + 1`,
		`INSERT INTO decisions (id, at, action, actor, actor_kind, effect) VALUES ('d1', now(), 'a2a.send', '{}', 'agent', 'allow')`,
	} {
		pgtest.Exec(t, pool, sql)
	}
	if after := dbRevision(t, pool); after != before {
		t.Fatalf("fact_revision %d → %d after changes of columns no lookup reads", before, after)
	}
}

// TestCatchUpAfterAGapReloads: a copy whose revision's changes were pruned
// (a replica away longer than fact_changes keeps them), or that is ahead of
// the database (restored from a backup), is reloaded whole — and exact.
func TestCatchUpAfterAGapReloads(t *testing.T) {
	pool := newPool(t)
	sp := specs(t)
	rec := &refreshes{}
	s := snapshot.New(pool, sp, snapshot.Options{OnRefresh: rec.record})
	pgtest.Exec(t, pool, `INSERT INTO agent_groups (id, name) VALUES ('g1', 'one'), ('g2', 'two')`)
	if err := s.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	pgtest.Exec(t, pool, `INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) VALUES ('g1', 'b', 'g2')`)
	pgtest.Exec(t, pool, `INSERT INTO agent_groups (id, name) VALUES ('g3', 'three')`)
	pgtest.Exec(t, pool, `DELETE FROM fact_changes WHERE rev < (SELECT rev FROM fact_revision)`) // the prune took the first
	if err := s.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if rec.get("full") != 2 {
		t.Fatalf("full loads %d, want 2 (the first and the one after the gap)", rec.get("full"))
	}
	assertExact(t, pool, sp, s, "a pruned gap")

	pgtest.Exec(t, pool, `UPDATE fact_revision SET rev = 1`) // a restored, older database
	pgtest.Exec(t, pool, `DELETE FROM agent_destinations`)
	if err := s.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if rec.get("full") != 3 {
		t.Fatalf("full loads %d, want 3 (a revision that went back reloads)", rec.get("full"))
	}
	assertExact(t, pool, sp, s, "a revision that went back")
}

// TestNoCopyWhileATriggerDoesNotMatch: a mirrored table whose trigger is
// missing, disabled or records another key would let the copy go stale
// with the revision unchanged, so while one does not match no copy is
// served at all (every decision reads its facts live) and it is counted;
// a trigger that goes while the copy is served is found by the next
// catch-up a failed revision check asks for, and a fixed one serves again.
func TestNoCopyWhileATriggerDoesNotMatch(t *testing.T) {
	sp := specs(t)
	for name, sql := range map[string]string{
		"dropped":     `DROP TRIGGER fact_changed ON agent_message_policies`,
		"disabled":    `ALTER TABLE agent_message_policies DISABLE TRIGGER fact_changed`,
		"no truncate": `DROP TRIGGER fact_truncated ON agent_message_policies`,
		"another key": `DROP TRIGGER fact_changed ON agent_message_policies;
			CREATE CONSTRAINT TRIGGER fact_changed AFTER INSERT OR DELETE OR UPDATE ON agent_message_policies
			DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION fact_changed('from_agent_group_id')`,
		"an unwatched column": `DROP TRIGGER fact_changed ON agent_message_policies;
			CREATE CONSTRAINT TRIGGER fact_changed AFTER INSERT OR DELETE OR UPDATE OF from_agent_group_id, to_agent_group_id, approver_user_id
			ON agent_message_policies DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
			EXECUTE FUNCTION fact_changed('from_agent_group_id', 'to_agent_group_id')`,
	} {
		t.Run(name, func(t *testing.T) {
			pool := newPool(t)
			pgtest.Exec(t, pool, sql)
			unmirrored := -1
			s := snapshot.New(pool, sp, snapshot.Options{OnUnmirrored: func(n int) { unmirrored = n }})
			if err := s.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			if unmirrored != 1 || s.Tables() != nil {
				t.Fatalf("unmirrored tables %d, copy served %v: want 1 and none", unmirrored, s.Tables() != nil)
			}
			problems, err := snapshot.CheckTriggers(ctx, pool, sp)
			if err != nil {
				t.Fatal(err)
			}
			if len(problems) != 1 || problems["agent_message_policies"] == "" {
				t.Fatalf("problems %v, want one for agent_message_policies", problems)
			}
		})
	}
	t.Run("gone while served, then fixed", func(t *testing.T) {
		pool := newPool(t)
		unmirrored := -1
		s := snapshot.New(pool, sp, snapshot.Options{OnUnmirrored: func(n int) { unmirrored = n }})
		if err := s.Refresh(ctx); err != nil || s.Tables() == nil {
			t.Fatalf("first load: %v, served %v", err, s.Tables() != nil)
		}
		pgtest.Exec(t, pool, `ALTER TABLE agent_destinations DISABLE TRIGGER fact_changed`)
		s.Behind(s.Revision()) // a decision's check failed: the revision has not moved
		if err := s.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if s.Tables() != nil || unmirrored != 1 {
			t.Fatalf("after a trigger went: copy served %v, unmirrored %d; want none and 1", s.Tables() != nil, unmirrored)
		}
		pgtest.Exec(t, pool, `ALTER TABLE agent_destinations ENABLE ALWAYS TRIGGER fact_changed`)
		if err := s.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if s.Tables() == nil || unmirrored != 0 {
			t.Fatalf("after it was fixed: copy served %v, unmirrored %d; want one and 0", s.Tables() != nil, unmirrored)
		}
	})
	t.Run("the migrated schema", func(t *testing.T) {
		problems, err := snapshot.CheckTriggers(ctx, newPool(t), sp)
		if err != nil || len(problems) != 0 {
			t.Fatalf("the migration's triggers do not match the catalog's lookups: %v %v", problems, err)
		}
	})
}

// TestNotifyWakesTheCopy: a committed change reaches a running copy through
// the listener's NOTIFY, with the safety-net poll an hour away.
func TestNotifyWakesTheCopy(t *testing.T) {
	pool := newPool(t)
	s := snapshot.New(pool, specs(t), snapshot.Options{Poll: time.Hour})
	l := listener.New(pool.Config().ConnConfig, slog.New(slog.NewTextHandler(io.Discard, nil)))
	l.Handle(snapshot.Channel, s)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go s.Run(runCtx)
	go func() { _ = l.Run(runCtx) }()
	<-s.Ready()
	for i := range 3 {
		pgtest.Exec(t, pool, fmt.Sprintf(`INSERT INTO agent_groups (id, name) VALUES ('g%d', 'n%d')`, i, i))
		want := dbRevision(t, pool)
		testserver.Eventually(t, 10*time.Second, "the copy to reach the committed revision", func() bool { return s.Revision() == want })
	}
}
