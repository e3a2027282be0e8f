package guard

import "hash/maphash"

// FactTables is a copy of the mirrored tables (Catalog.Tables, by index)
// exact at one fact revision. It never changes once built: a catch-up
// builds the next revision's copy with With, sharing what did not change,
// so decisions read it without a lock. Each table is split in shards by
// key hash, so a revision that changes a few keys copies a few small maps,
// not the table.
type FactTables struct {
	revision int64
	tables   []*factTable
}

const factShards = 64

type factTable struct {
	shards [factShards]map[string][][]*string
}

var factSeed = maphash.MakeSeed()

func shardOf(key []byte) int { return int(maphash.Bytes(factSeed, key) % factShards) }

// NewFactTables is the copy of whole tables at rev: rows[t] maps each key
// of table t to its rows' values.
func NewFactTables(rev int64, rows []map[string][][]*string) *FactTables {
	ft := &FactTables{revision: rev, tables: make([]*factTable, len(rows))}
	for t, m := range rows {
		ft.tables[t] = newFactTable(m)
	}
	return ft
}

func newFactTable(m map[string][][]*string) *factTable {
	tb := &factTable{}
	for i := range tb.shards {
		tb.shards[i] = map[string][][]*string{}
	}
	for k, rs := range m {
		tb.shards[shardOf([]byte(k))][k] = rs
	}
	return tb
}

// With is the copy at rev after the given changes: whole[t] != nil
// replaces table t; otherwise each key of changed[t] gets the rows it maps
// to (none: the key is gone).
func (ft *FactTables) With(rev int64, changed, whole []map[string][][]*string) *FactTables {
	out := &FactTables{revision: rev, tables: make([]*factTable, len(ft.tables))}
	copy(out.tables, ft.tables)
	for t := range out.tables {
		if t < len(whole) && whole[t] != nil {
			out.tables[t] = newFactTable(whole[t])
			continue
		}
		if t >= len(changed) || len(changed[t]) == 0 {
			continue
		}
		tb := *out.tables[t] // the shard pointers; the changed shards are cloned below
		cloned := [factShards]bool{}
		for k, rs := range changed[t] {
			sh := shardOf([]byte(k))
			if !cloned[sh] {
				m := make(map[string][][]*string, len(tb.shards[sh])+len(changed[t]))
				for k2, v := range tb.shards[sh] {
					m[k2] = v
				}
				tb.shards[sh], cloned[sh] = m, true
			}
			if len(rs) == 0 {
				delete(tb.shards[sh], k)
			} else {
				tb.shards[sh][k] = rs
			}
		}
		out.tables[t] = &tb
	}
	return out
}

// Revision is the fact_revision the copy is exact at.
func (ft *FactTables) Revision() int64 { return ft.revision }

// Rows are the mirrored values (TableSpec.Values, NULL as nil) of table's
// rows whose key is key (the key columns' values joined by KeySep).
func (ft *FactTables) Rows(table int, key []byte) [][]*string {
	return ft.tables[table].shards[shardOf(key)][string(key)]
}

// Keys is how many keys table holds.
func (ft *FactTables) Keys(table int) int {
	n := 0
	for _, m := range ft.tables[table].shards {
		n += len(m)
	}
	return n
}

// Each calls fn for every key of table and its rows (tests, debugging).
func (ft *FactTables) Each(table int, fn func(key string, rows [][]*string)) {
	for _, m := range ft.tables[table].shards {
		for k, rs := range m {
			fn(k, rs)
		}
	}
}
