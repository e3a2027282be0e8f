package guard

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// A Lookup is a fact that reads one row of a mirrored table by its lookup
// key: whether such a row exists, or one of its columns. Declared this way
// a fact has two readings that agree: the SQL the live path runs (derived
// from the declaration, same parameter convention as Fact.SQL) and a map
// lookup in the replica's snapshot of the table (package snapshot), which
// lets a decision skip the facts read. A table is mirrored by the
// columns its lookups name; the migration's fact_changed trigger on it must
// take the same key columns as arguments and fire on updates of every
// mirrored column (the snapshot checks both at start).
type Lookup struct {
	Table string
	// Key is the table's lookup key: each column equals a parameter. Every
	// lookup of a table names the same key columns in the same order.
	Key []KeyEq
	// Column is the value read; "" reads whether a row with the key exists.
	Column string
	// Expr, when set, is SQL applied to Column ("%s" stands for it), read
	// as text like the column (e.g. "array_to_string(%s, ' ')").
	Expr string
}

// KeyEq is one key column and the parameter it must equal.
type KeyEq struct {
	Column string
	Equals Param
}

// Param is what a key column is compared with.
type Param struct {
	kind  paramKind
	arg   int
	value string
}

type paramKind int

const (
	paramActorGroup paramKind = iota + 1
	paramSession
	paramArg
	paramLiteral
	paramRunner
)

// The parameters a lookup key may use.
var (
	// ActorGroup is the actor's agent group ($1; "" when not an agent).
	ActorGroup = Param{kind: paramActorGroup}
	// ActorSession is the actor's session ($2).
	ActorSession = Param{kind: paramSession}
	// CallerRunner is the runner asking for its agent ($4; "" for other
	// callers).
	CallerRunner = Param{kind: paramRunner}
)

// Arg is the entry's i-th argument (Args(in)[i], $6+i), which must be a string.
func Arg(i int) Param { return Param{kind: paramArg, arg: i} }

// Literal is a constant.
func Literal(s string) Param { return Param{kind: paramLiteral, value: s} }

// Fact returns the lookup as a named fact.
func (l Lookup) Fact(name string) Fact {
	return Fact{Name: name, SQL: l.sql(), Lookup: &l}
}

var identRe = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

func (l Lookup) check() error {
	if !identRe.MatchString(l.Table) || len(l.Key) == 0 {
		return fmt.Errorf("lookup of %q: want a table name and a key", l.Table)
	}
	if l.Column != "" && !identRe.MatchString(l.Column) {
		return fmt.Errorf("lookup of %s: column %q is not a plain column name", l.Table, l.Column)
	}
	if l.Expr != "" && (l.Column == "" || strings.Count(l.Expr, "%s") != 1 || strings.Contains(l.Expr, "$")) {
		return fmt.Errorf("lookup of %s: expr %q must apply to its column once and take no parameters", l.Table, l.Expr)
	}
	for _, k := range l.Key {
		if !identRe.MatchString(k.Column) || k.Equals.kind == 0 || (k.Equals.kind == paramArg && k.Equals.arg < 0) {
			return fmt.Errorf("lookup of %s: bad key column %q", l.Table, k.Column)
		}
	}
	return nil
}

// value is the select expression of the value read ("" for existence).
func (l Lookup) value() string {
	if l.Column == "" || l.Expr == "" {
		return l.Column
	}
	return fmt.Sprintf(l.Expr, l.Column)
}

func (l Lookup) keyColumns() []string {
	out := make([]string, len(l.Key))
	for i, k := range l.Key {
		out[i] = k.Column
	}
	return out
}

func (l Lookup) sql() string {
	where := make([]string, len(l.Key))
	for i, k := range l.Key {
		where[i] = k.Column + " = " + k.Equals.sql()
	}
	cond := strings.Join(where, " AND ")
	if l.Column == "" {
		return fmt.Sprintf("SELECT EXISTS (SELECT 1 FROM %s WHERE %s)", l.Table, cond)
	}
	return fmt.Sprintf("SELECT %s FROM %s WHERE %s", l.value(), l.Table, cond)
}

func (p Param) sql() string {
	switch p.kind {
	case paramActorGroup:
		return "$1"
	case paramSession:
		return "$2"
	case paramRunner:
		return "$4::text"
	case paramArg:
		return fmt.Sprintf("$%d::text", 6+p.arg)
	}
	return "'" + strings.ReplaceAll(p.value, "'", "''") + "'"
}

// TableSpec is a mirrored table as the catalog's lookups read it.
type TableSpec struct {
	Name string
	// Key are the lookup key's columns (the fact_changed trigger's arguments).
	Key []string
	// Values are the select expressions of the mirrored values, in the
	// order of a row's values in the snapshot.
	Values []string
	// Columns are the plain columns the key and values read: an update of
	// any of them must fire the table's trigger.
	Columns []string
}

// tableSet collects the table specs of the catalog's lookups.
type tableSet struct {
	specs []TableSpec
	index map[string]int
}

// clone is a deep copy (Register adds to one and keeps it only on success).
func (ts tableSet) clone() tableSet {
	out := tableSet{specs: make([]TableSpec, len(ts.specs)), index: maps.Clone(ts.index)}
	for i, s := range ts.specs {
		out.specs[i] = TableSpec{Name: s.Name, Key: slices.Clone(s.Key), Values: slices.Clone(s.Values), Columns: slices.Clone(s.Columns)}
	}
	return out
}

// add records l's table, key and value; it returns the table's index and
// the value's (-1 for existence).
func (ts *tableSet) add(l Lookup) (table, value int, err error) {
	if ts.index == nil {
		ts.index = map[string]int{}
	}
	key := l.keyColumns()
	t, ok := ts.index[l.Table]
	if !ok {
		t = len(ts.specs)
		ts.index[l.Table] = t
		ts.specs = append(ts.specs, TableSpec{Name: l.Table, Key: key, Columns: slices.Clone(key)})
	}
	spec := &ts.specs[t]
	if !slices.Equal(spec.Key, key) {
		return 0, 0, fmt.Errorf("lookups of %s name two keys: (%s) and (%s)", l.Table,
			strings.Join(spec.Key, ", "), strings.Join(key, ", "))
	}
	if l.Column == "" {
		return t, -1, nil
	}
	if !slices.Contains(spec.Columns, l.Column) {
		spec.Columns = append(spec.Columns, l.Column)
	}
	v := slices.Index(spec.Values, l.value())
	if v < 0 {
		v = len(spec.Values)
		spec.Values = append(spec.Values, l.value())
	}
	return t, v, nil
}

// Tables lists the tables the catalog's lookups read, by index (the
// snapshot keeps them in this order).
func (c *Catalog) Tables() []TableSpec {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := c.tables.clone().specs
	for i := range out {
		sort.Strings(out[i].Columns)
	}
	return out
}

// Snapshot is the replica's in-memory copy of the tables the catalog's
// lookups read (package snapshot), exact at a revision of the database's
// fact_revision.
type Snapshot interface {
	// Tables is the copy at its latest revision; nil while there is none
	// (still loading). It is immutable: a catch-up publishes a new one.
	Tables() *FactTables
	// Behind reports a decision that found the database past rev.
	Behind(rev int64)
}

// KeySep joins a multi-column lookup key (text holds no NUL byte).
const KeySep = "\x00"

// compiledLookup is a lookup bound to its table and value index.
type compiledLookup struct {
	Lookup
	table, value int
}

// lookupReader reads a decision's lookups from one view, reading each
// (table, key) once: a2a.send's four policy columns are one row.
type lookupReader struct {
	v                      *FactTables
	group, session, runner string
	args                   []string
	key                    [160]byte // the key being built (ids are ≤ 128 bytes)
	seen                   [8]seenRows
	nseen                  int
	arena                  [512]byte // the seen keys' bytes (kept on the stack)
	used                   int
}

type seenRows struct {
	table    int
	from, to int // the key in arena
	rows     [][]*string
}

// read reads one lookup.
func (r *lookupReader) read(cl *compiledLookup) (*string, error) {
	key := r.key[:0]
	for i, k := range cl.Key {
		if i > 0 {
			key = append(key, KeySep...)
		}
		switch k.Equals.kind {
		case paramActorGroup:
			key = append(key, r.group...)
		case paramSession:
			key = append(key, r.session...)
		case paramRunner:
			key = append(key, r.runner...)
		case paramArg:
			if k.Equals.arg >= len(r.args) {
				return nil, fmt.Errorf("lookup of %s: argument %d missing", cl.Table, k.Equals.arg)
			}
			key = append(key, r.args[k.Equals.arg]...)
		default:
			key = append(key, k.Equals.value...)
		}
	}
	rows, found := r.recall(cl.table, key)
	if !found {
		rows = r.v.Rows(cl.table, key)
		if r.nseen < len(r.seen) && r.used+len(key) <= len(r.arena) {
			n := copy(r.arena[r.used:], key)
			r.seen[r.nseen] = seenRows{table: cl.table, from: r.used, to: r.used + n, rows: rows}
			r.used += n
			r.nseen++
		}
	}
	if cl.value < 0 {
		if len(rows) > 0 {
			return &factTrue, nil
		}
		return &factFalse, nil
	}
	switch len(rows) {
	case 0:
		return nil, nil
	case 1:
		return rows[0][cl.value], nil
	}
	// The SQL reading fails the same way (a scalar subquery of two rows).
	return nil, fmt.Errorf("lookup of %s.%s: %d rows for one key", cl.Table, cl.Column, len(rows))
}

func (r *lookupReader) recall(table int, key []byte) ([][]*string, bool) {
	for i := range r.nseen {
		if s := &r.seen[i]; s.table == table && string(r.arena[s.from:s.to]) == string(key) {
			return s.rows, true
		}
	}
	return nil, false
}

// Postgres' text of a boolean, as the SQL reading returns it.
var factTrue, factFalse = "true", "false"
