package pushes_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/clawguard/clawguard/migrations/pgtest"
	"github.com/clawguard/clawguard/server/internal/pushes"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// Sending counts one attempt of each push it is given, one push (by key)
// or several (by the array), and no other push's.
func TestSendingCountsAnAttemptOfEachPushGiven(t *testing.T) {
	pool := pgtest.NewPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := pool.Exec(ctx, `INSERT INTO runner_pushes (id, kind, body) VALUES ('p1', 'notify', ''), ('p2', 'notify', ''), ('p3', 'notify', '')`); err != nil {
		t.Fatal(err)
	}
	if err := pushes.Sending(ctx, pool, []string{"p1"}); err != nil {
		t.Fatal(err)
	}
	if err := pushes.Sending(ctx, pool, []string{"p1", "p2"}); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	rows, err := pool.Query(ctx, `SELECT id, attempts FROM runner_pushes`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		got[id] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if got["p1"] != 2 || got["p2"] != 1 || got["p3"] != 0 {
		t.Fatalf("attempts %v, want p1 2, p2 1, p3 0", got)
	}
}
