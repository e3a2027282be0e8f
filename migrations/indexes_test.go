package migrations_test

import (
	"context"
	"testing"

	"github.com/clawguard/clawguard/migrations"
	"github.com/clawguard/clawguard/migrations/pgtest"
)

// An index whose columns lead another's, with the same predicate and
// order, serves no read the other does not, and every write pays for it
// (runner_pushes had one until 0203). A unique index is left alone: it
// constrains.
func TestNoIndexIsAPrefixOfAnother(t *testing.T) {
	ctx := context.Background()
	db := pool(t, pgtest.NewEmptyDB(t))
	if _, err := migrations.Apply(ctx, db, 0); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(ctx, `
		SELECT a.indexrelid::regclass::text, b.indexrelid::regclass::text
		FROM pg_index a
		JOIN pg_index b ON b.indrelid = a.indrelid AND b.indexrelid <> a.indexrelid
		JOIN pg_class ca ON ca.oid = a.indexrelid
		JOIN pg_class cb ON cb.oid = b.indexrelid
		WHERE ca.relnamespace = 'public'::regnamespace AND NOT a.indisunique AND ca.relam = cb.relam
		  AND a.indexprs IS NULL AND b.indexprs IS NULL
		  AND COALESCE(pg_get_expr(a.indpred, a.indrelid), '') = COALESCE(pg_get_expr(b.indpred, b.indrelid), '')
		  AND a.indnatts <= b.indnatts
		  AND (a.indkey::int2[])[0:a.indnatts-1] = (b.indkey::int2[])[0:a.indnatts-1]
		  AND (a.indclass::oid[])[0:a.indnatts-1] = (b.indclass::oid[])[0:a.indnatts-1]
		  AND (a.indoption::int2[])[0:a.indnatts-1] = (b.indoption::int2[])[0:a.indnatts-1]
		  AND (a.indnatts < b.indnatts OR a.indexrelid > b.indexrelid)`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var redundant, by string
		if err := rows.Scan(&redundant, &by); err != nil {
			t.Fatal(err)
		}
		t.Errorf("index %s is a prefix of %s: drop it", redundant, by)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}
