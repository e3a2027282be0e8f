package migrations_test

import (
	"context"
	"testing"

	"github.com/clawguard/clawguard/migrations"
	"github.com/clawguard/clawguard/migrations/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// 0160 partitions the decision log and moves the idempotency keys out of it.
// It must carry every row, and every retry key with its stored answer (an
// in-flight retry must still get its original answer), whichever order it
// runs in: before 0170-0191 on a database upgraded from before them, after
// them on one that already has them (migrations apply set-based).
func TestDecisionPartitionsCarryRows(t *testing.T) {
	for name, laterFirst := range map[string]bool{"before later migrations": false, "after later migrations": true} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			db := pool(t, pgtest.NewEmptyDB(t))
			if _, err := migrations.Apply(ctx, db, 150); err != nil {
				t.Fatal(err)
			}
			if laterFirst {
				applyAbove(t, db, 160)
			}
			exec(t, db, `INSERT INTO decisions (id, at, action, actor, actor_kind, effect, runner_id, request_id, answer, hold_id) VALUES
				('d-old', now() - interval '3 days', 'a2a.send', '{}', 'agent', 'allow', 'r1', 'req-1', '\x0a01', ''),
				('d-now', now(), 'a2a.send', '{}', 'agent', 'hold', 'r1', '', NULL, 'hold-1'),
				('d-ancient', now() - interval '90 days', 'a2a.send', '{}', 'agent', 'deny', 'r2', 'req-2', '\x0a02', '')`)
			if _, err := migrations.Apply(ctx, db, 0); err != nil {
				t.Fatal(err)
			}
			for q, want := range map[string]int{
				`SELECT count(*) FROM decisions`:         3,
				`SELECT count(*) FROM decisions_default`: 0,
				// Older than the 31 days given their own partitions: one partition of everything before.
				`SELECT count(*) FROM decisions WHERE id = 'd-ancient' AND tableoid = ('decisions_before_' || to_char(((now() - interval '31 days') AT TIME ZONE 'UTC')::date, 'YYYYMMDD'))::regclass`: 1,
				`SELECT count(*) FROM decision_requests WHERE runner_id = 'r1' AND request_id = 'req-1' AND decision_id = 'd-old' AND answer = '\x0a01'`:                                               1,
				`SELECT count(*) FROM decision_requests`:                                                               2,
				`SELECT count(*) FROM pg_partitioned_table WHERE partrelid = 'decisions'::regclass`:                    1,
				`SELECT count(*) FROM pg_indexes WHERE tablename = 'decisions' AND indexname = 'decisions_hold_idx'`:   1,
				`SELECT count(*) FROM pg_indexes WHERE tablename = 'decisions' AND indexname = 'decisions_effect_idx'`: 0,
				// Today and the next three days exist, and the day of d-old.
				`SELECT count(*) FROM pg_class WHERE relname = 'decisions_' || to_char((now() AT TIME ZONE 'UTC')::date + 3, 'YYYYMMDD')`:                                                  1,
				`SELECT count(*) FROM decisions WHERE id = 'd-old' AND tableoid = ('decisions_' || to_char(((now() - interval '3 days') AT TIME ZONE 'UTC')::date, 'YYYYMMDD'))::regclass`: 1,
			} {
				var n int
				if err := db.QueryRow(ctx, q).Scan(&n); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
				if n != want {
					t.Errorf("%s = %d, want %d", q, n, want)
				}
			}
			// A row of a day without a partition lands in the default one.
			exec(t, db, `INSERT INTO decisions (id, at, action, actor, actor_kind, effect) VALUES
				('d-future', now() + interval '400 days', 'a2a.send', '{}', 'agent', 'allow')`)
		})
	}
}

// applyAbove applies every migration above version by hand, as a database
// that got them before this one would have.
func applyAbove(t *testing.T, db *pgxpool.Pool, version int) {
	t.Helper()
	all, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range all {
		if m.Version <= version {
			continue
		}
		exec(t, db, m.SQL)
		if _, err := db.Exec(context.Background(), `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
			t.Fatal(err)
		}
	}
}

func exec(t *testing.T, db *pgxpool.Pool, sql string) {
	t.Helper()
	if _, err := db.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
