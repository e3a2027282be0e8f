package ncl

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Issue 13: ncl approvals list showed at most the first page (and the
// server turned a limit above 1,000 into 100). It now reads every page by
// default, and --limit caps what it prints.
func TestApprovalsListReadsEveryPage(t *testing.T) {
	srv := startRealServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, srv.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	const n = 2345
	if _, err := conn.Exec(ctx, `INSERT INTO holds (id, kind, created_at)
		SELECT 'ho_' || lpad(i::text, 5, '0'), 'onecli_credential', now() - (i % 7) * interval '1 second'
		FROM generate_series(1, 2345) AS i`); err != nil {
		t.Fatal(err)
	}
	all := jsonArr(t, srv.must(t, "approvals", "list", "--kind", "onecli_credential", "-o", "json"))
	seen := map[any]bool{}
	for _, h := range all {
		seen[h["id"]] = true
	}
	if len(all) != n || len(seen) != n {
		t.Fatalf("approvals list printed %d holds (%d distinct), want every one of %d", len(all), len(seen), n)
	}
	if some := jsonArr(t, srv.must(t, "approvals", "list", "--kind", "onecli_credential", "--limit", "1500", "-o", "json")); len(some) != 1500 {
		t.Fatalf("--limit 1500 printed %d holds, want 1500", len(some))
	}
}

// Issue 13: ncl groups list printed only what one ListGroups answered, and
// a group's name resolved only if it was on that answer. Every page is
// read now, --limit caps, and a name past the first page still resolves.
func TestGroupsListReadsEveryPage(t *testing.T) {
	srv := startRealServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, srv.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `INSERT INTO agent_groups (id, name)
		SELECT 'ag_pg' || lpad(i::text, 5, '0'), 'pg-' || lpad(i::text, 5, '0') FROM generate_series(1, 1234) AS i`); err != nil {
		t.Fatal(err)
	}
	seen := map[any]bool{}
	for _, g := range jsonArr(t, srv.must(t, "groups", "list", "-o", "json")) {
		if id, _ := g["id"].(string); len(id) > 5 && id[:5] == "ag_pg" {
			seen[id] = true
		}
	}
	if len(seen) != 1234 {
		t.Fatalf("groups list printed %d of the 1234 groups", len(seen))
	}
	if some := jsonArr(t, srv.must(t, "groups", "list", "--limit", "1001", "-o", "json")); len(some) != 1001 {
		t.Fatalf("--limit 1001 printed %d groups, want 1001", len(some))
	}
	if g := jsonObj(t, srv.must(t, "groups", "get", "pg-01200", "-o", "json")); g["id"] != "ag_pg01200" {
		t.Fatalf("groups get by a name past the first page: %v", g)
	}
}
