package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/clawguard/clawguard/migrations/pgtest"
	"github.com/clawguard/clawguard/server/internal/store"
)

// A decision is found by the time its id carries, on the log's key, in the
// one partition of its day; one logged before ids carried a time (a random
// id) is still found, by id alone; a missing one is not found.
func TestADecisionIsFoundByTheTimeItsIDCarries(t *testing.T) {
	pool := pgtest.NewPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	now := time.Now()
	ordered := store.NewOrderedID("dec_", now)
	legacy := "dec_" + strings.Repeat("ff", 14) // a random id: its "time" is far in the future
	if _, err := pool.Exec(ctx, `SELECT decisions_ensure_partitions(($1::timestamptz - interval '40 days')::date, $1::date)`, now); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO decisions (id, at, action, actor, actor_kind, effect) VALUES
		($1, $2, 'a', '{}', 'system', 'allow'), ($3, $4, 'a', '{}', 'system', 'deny')`,
		ordered, now, legacy, now.Add(-20*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	find := func(id string) string {
		t.Helper()
		key, args := store.DecisionKey(1, id)
		var effect string
		err := pool.QueryRow(ctx, `SELECT effect FROM decisions WHERE `+key, args...).Scan(&effect)
		if err != nil && !strings.Contains(err.Error(), "no rows") {
			t.Fatal(err)
		}
		return effect
	}
	if got := find(ordered); got != "allow" {
		t.Errorf("the decision by its id's time: %q, want allow", got)
	}
	if got := find(legacy); got != "deny" {
		t.Errorf("a random id's decision: %q, want deny", got)
	}
	if got := find(store.NewOrderedID("dec_", now)); got != "" {
		t.Errorf("a decision never logged: %q, want none", got)
	}
	// The plan reads one partition, on its key.
	key, args := store.DecisionKey(1, ordered)
	rows, err := pool.Query(ctx, `EXPLAIN (ANALYZE, COSTS OFF, SUMMARY OFF, TIMING OFF) SELECT effect FROM decisions WHERE `+key, args...)
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	text := strings.Join(plan, "\n")
	if scans := strings.Count(text, " Scan "); scans != 1 || !strings.Contains(text, "_pkey on decisions_") {
		t.Errorf("the lookup does not read one partition's key:\n%s", text)
	}
}
