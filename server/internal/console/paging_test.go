package console_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// Issue 13: the registry lists now answer a page at a time (100 by
// default); the console's tables still show every row the user may read.
func TestTablesReadEveryPage(t *testing.T) {
	f := start(t)
	if _, err := f.srv.Pool.Exec(context.Background(), `INSERT INTO agent_groups (id, name)
		SELECT 'ag_pg' || lpad(i::text, 4, '0'), 'pg-' || lpad(i::text, 4, '0') FROM generate_series(1, 1234) AS i`); err != nil {
		t.Fatal(err)
	}
	olga := newBrowser(t, f.base)
	olga.signIn(f.olga)
	_, page := olga.get("/groups")
	for _, i := range []int{1, 100, 101, 1000, 1001, 1234} {
		if id := fmt.Sprintf("ag_pg%04d", i); !strings.Contains(page, id) {
			t.Fatalf("the groups page lacks %s (past the first page?)", id)
		}
	}
}
