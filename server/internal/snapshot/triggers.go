package snapshot

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/clawguard/clawguard/server/internal/guard"
)

// Trigger type bits (pg_trigger.tgtype, Postgres' trigger.h).
const (
	tgRow      = 1 << 0
	tgBefore   = 1 << 1
	tgInsert   = 1 << 2
	tgDelete   = 1 << 3
	tgUpdate   = 1 << 4
	tgTruncate = 1 << 5
)

// CheckTriggers compares each mirrored table's triggers with what the
// catalog mirrors and says, by table, what is wrong ("" entries are left
// out): the copy of a table is exact only if every change of a mirrored
// column bumps the revision and records the lookup key. It wants, enabled
// (origin or always): fact_changed, an AFTER row trigger on insert, delete
// and update of every mirrored column, calling fact_changed() with the key
// columns as arguments; and fact_truncated, on TRUNCATE.
func CheckTriggers(ctx context.Context, q interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}, specs []guard.TableSpec) (map[string]string, error) {
	names := make([]string, len(specs))
	for i, sp := range specs {
		names[i] = sp.Name
	}
	rows, err := q.Query(ctx, `SELECT n.name, t.tgname, t.tgenabled::text, t.tgtype::int, t.tgfoid::regproc::text, t.tgargs,
			ARRAY(SELECT a.attname::text FROM pg_attribute a WHERE a.attrelid = t.tgrelid AND a.attnum = ANY (t.tgattr))
		FROM unnest($1::text[]) AS n(name)
		JOIN pg_trigger t ON t.tgrelid = to_regclass(n.name)
		WHERE t.tgname IN ('fact_changed', 'fact_truncated')`, names)
	if err != nil {
		return nil, fmt.Errorf("read fact triggers: %w", err)
	}
	type trig struct {
		enabled, fn string
		typ         int
		args        []string
		cols        []string
	}
	found := map[string]map[string]trig{}
	for rows.Next() {
		var table, name string
		var t trig
		var rawArgs []byte
		if err := rows.Scan(&table, &name, &t.enabled, &t.typ, &t.fn, &rawArgs, &t.cols); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read fact triggers: %w", err)
		}
		// tgargs: each argument NUL-terminated.
		for _, a := range strings.Split(string(rawArgs), "\x00") {
			if a != "" {
				t.args = append(t.args, a)
			}
		}
		if found[table] == nil {
			found[table] = map[string]trig{}
		}
		found[table][name] = t
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read fact triggers: %w", err)
	}
	enabled := func(t trig) bool { return t.enabled == "O" || t.enabled == "A" }
	problems := map[string]string{}
	for _, sp := range specs {
		ch, okC := found[sp.Name]["fact_changed"]
		tr, okT := found[sp.Name]["fact_truncated"]
		var missing []string
		for _, c := range sp.Columns {
			if !slices.Contains(ch.cols, c) {
				missing = append(missing, c)
			}
		}
		switch {
		case !okC:
			problems[sp.Name] = "no fact_changed trigger"
		case !enabled(ch):
			problems[sp.Name] = "fact_changed trigger disabled"
		case ch.fn != "fact_changed" || ch.typ&(tgRow|tgBefore) != tgRow || ch.typ&(tgInsert|tgDelete|tgUpdate) != tgInsert|tgDelete|tgUpdate:
			problems[sp.Name] = "fact_changed is not an AFTER row trigger of fact_changed() on insert, update and delete"
		case !slices.Equal(ch.args, sp.Key):
			problems[sp.Name] = fmt.Sprintf("fact_changed records key (%s), the lookups use (%s)", strings.Join(ch.args, ", "), strings.Join(sp.Key, ", "))
		case len(ch.cols) > 0 && len(missing) > 0:
			problems[sp.Name] = "fact_changed does not fire on updates of " + strings.Join(missing, ", ")
		case !okT || !enabled(tr) || tr.typ&tgTruncate == 0:
			problems[sp.Name] = "no enabled fact_truncated trigger"
		}
	}
	return problems, nil
}
