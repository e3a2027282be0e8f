// Package snapshot keeps the replica's in-memory copy of the tables the
// guard's lookups read (guard.Lookup), exact at a revision of the
// database's fact_revision (migration 0200). The copy is loaded whole at
// start and caught up by re-reading, at the newer revision, the keys every
// revision since changed (fact_changes); a catch-up is woken by the
// clawguard_facts NOTIFY (through the replica's listener), by a decision
// that found the database ahead (Behind), and by a poll as the safety net.
//
// The copy never decides on its own authority: the guard logs a decision
// made from it only while fact_revision still equals the copy's revision
// (checked by the log INSERT, with the triggers that move the revision),
// so a lagging copy costs a live decision, never a stale answer. While a
// mirrored table's trigger does not match what the catalog mirrors, no
// copy is served (every decision is read live) and that is reported.
//
// The copy is exact at a revision of fact_revision (migration 0200): loaded
// whole, caught up by re-reading the keys each later revision changed
// (fact_changes), woken by the clawguard_facts NOTIFY, by a decision that
// found the database ahead, and by a 1 s poll; reloaded whole after a gap or
// a revision that went back. No copy is served while a mirrored table's
// triggers do not match what the catalog mirrors (CheckTriggers, at start,
// on every full load and when a failed check finds the revision unmoved).
package snapshot

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/clawguard/clawguard/server/internal/guard"
)

// Channel is the NOTIFY channel of fact changes (fact_revision_bump).
const Channel = "clawguard_facts"

// DefaultPoll is the safety-net catch-up interval.
const DefaultPoll = time.Second

// Options configure a Snapshot.
type Options struct {
	Log *slog.Logger
	// Poll is the catch-up interval without a wake-up (default DefaultPoll).
	Poll time.Duration
	// OnRefresh is told of each catch-up that changed the copy: "delta" or
	// "full", the revision reached and how long it took.
	OnRefresh func(kind string, rev int64, took time.Duration)
	// OnError is told of a catch-up that failed (it is retried).
	OnError func(err error)
	// OnUnmirrored is told, after each check of the triggers, how many
	// tables are not served because their trigger does not match.
	OnUnmirrored func(n int)
}

// Snapshot is the copy. Its zero value is not usable; see New.
type Snapshot struct {
	pool  *pgxpool.Pool
	specs []guard.TableSpec
	o     Options
	wake  chan struct{}
	// loaded is closed once the first load is in (Ready).
	loaded     chan struct{}
	loadedOnce sync.Once
	// refreshing serialises catch-ups (each applies on top of the last).
	refreshing sync.Mutex

	// cur is the copy at its latest revision (nil before the first load,
	// and while a trigger does not match); each catch-up publishes a new one.
	cur atomic.Pointer[guard.FactTables]
	// behind is set by a decision whose revision check failed: a catch-up
	// that then finds the revision unmoved checks the triggers (a dropped
	// or disabled one fails the check without moving the revision).
	behind atomic.Bool
	// reported: the trigger problems were logged (once, until fixed).
	reported atomic.Bool
}

// New returns a copy of the tables specs describes (guard.Catalog.Tables),
// empty until Run loads it.
func New(pool *pgxpool.Pool, specs []guard.TableSpec, o Options) *Snapshot {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	return &Snapshot{pool: pool, specs: specs, o: o, wake: make(chan struct{}, 1), loaded: make(chan struct{})}
}

// Run loads the copy and keeps it caught up until ctx ends.
func (s *Snapshot) Run(ctx context.Context) {
	t := time.NewTicker(s.o.Poll)
	defer t.Stop()
	failing := false
	for {
		err := s.Refresh(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil:
			if s.o.OnError != nil {
				s.o.OnError(err)
			}
			if !failing { // once per outage, not once per poll
				s.o.Log.Warn("fact snapshot: catch-up failed; decisions are read live until it succeeds", "err", err)
			}
			failing = true
		case failing:
			s.o.Log.Info("fact snapshot: caught up again")
			failing = false
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-t.C:
		}
	}
}

// Ready is closed once the first load is in.
func (s *Snapshot) Ready() <-chan struct{} { return s.loaded }

// Revision is the revision the copy is exact at (-1 before the first load).
func (s *Snapshot) Revision() int64 {
	if ft := s.cur.Load(); ft != nil {
		return ft.Revision()
	}
	return -1
}

// Wake asks for a catch-up (non-blocking; wake-ups coalesce).
func (s *Snapshot) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Behind implements guard.Snapshot: a decision's revision check failed.
func (s *Snapshot) Behind(int64) {
	s.behind.Store(true)
	s.Wake()
}

// HandleNotification implements listener.Handler: a fact change committed.
func (s *Snapshot) HandleNotification(context.Context, *pgconn.Notification, *pgx.Conn) error {
	s.Wake()
	return nil
}

// HandleBacklog implements listener.Handler: after a (re)connect, catch up
// on whatever committed while nobody listened.
func (s *Snapshot) HandleBacklog(context.Context, string, *pgx.Conn) error {
	s.Wake()
	return nil
}

// Tables implements guard.Snapshot: the copy at its latest revision.
func (s *Snapshot) Tables() *guard.FactTables { return s.cur.Load() }

// Refresh brings the copy to the database's current revision: the keys
// changed since the copy's revision are re-read, or, on the first call,
// after a gap (fact_changes pruned past it) or a revision that went back
// (a restored database), everything is. All of it is read in one
// repeatable-read transaction, so the copy is exact at the revision read.
func (s *Snapshot) Refresh(ctx context.Context) error {
	s.refreshing.Lock()
	defer s.refreshing.Unlock()
	prev := s.cur.Load()
	ready, have := prev != nil, s.Revision()
	start := time.Now()
	var (
		kind string
		cur  int64
	)
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT rev FROM fact_revision`).Scan(&cur); err != nil {
			return fmt.Errorf("read fact revision: %w", err)
		}
		if ready && cur == have {
			if s.behind.Swap(false) {
				s.triggersIntact(ctx, tx) // serves nothing if one went
			}
			return nil
		}
		if ready && cur > have {
			applied, err := s.catchUp(ctx, tx, prev, cur)
			if err != nil || applied {
				kind = "delta"
				return err
			}
		}
		kind = "full"
		return s.loadAll(ctx, tx, cur)
	})
	if err != nil {
		return fmt.Errorf("fact snapshot: %w", err)
	}
	if kind != "" && s.o.OnRefresh != nil {
		s.o.OnRefresh(kind, cur, time.Since(start))
	}
	return nil
}

// A catch-up reads a table whole instead of by its changed keys when at
// least wholeReloadMin keys changed and they are at least 1/wholeReloadShare
// of the keys the copy holds: a scan costs a row far less than a read by
// key list costs a key, and a bulk load read key by key left the replica
// deciding live for its first half second (BENCHMARKS.md, "Figures behind
// code choices").
const (
	wholeReloadMin   = 1024
	wholeReloadShare = 8
)

// catchUp applies the changes of revisions (prev's, cur]; applied is false
// when fact_changes no longer holds all of them (pruned: reload instead).
func (s *Snapshot) catchUp(ctx context.Context, tx pgx.Tx, prev *guard.FactTables, cur int64) (applied bool, err error) {
	have := prev.Revision()
	rows, err := tx.Query(ctx, `SELECT rev, table_name, key FROM fact_changes WHERE rev > $1 AND rev <= $2 ORDER BY rev`, have, cur)
	if err != nil {
		return false, fmt.Errorf("read fact changes: %w", err)
	}
	type change struct {
		rev   int64
		table string
		key   []*string
	}
	changes, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (change, error) {
		var c change
		return c, r.Scan(&c.rev, &c.table, &c.key)
	})
	if err != nil {
		return false, fmt.Errorf("read fact changes: %w", err)
	}
	if len(changes) == 0 || changes[0].rev != have+1 {
		return false, nil
	}
	index := map[string]int{}
	for i, sp := range s.specs {
		index[sp.Name] = i
	}
	changed := make([]map[string]bool, len(s.specs)) // by table: keys to re-read
	whole := make([]bool, len(s.specs))
	for _, c := range changes {
		t, ok := index[c.table]
		if !ok {
			continue // a table the catalog does not mirror
		}
		if c.key == nil {
			whole[t] = true // TRUNCATE
			continue
		}
		k, ok := joinKey(c.key, len(s.specs[t].Key))
		if !ok {
			continue // a NULL key part: a row no lookup can match
		}
		if changed[t] == nil {
			changed[t] = map[string]bool{}
		}
		changed[t][k] = true
	}
	for t := range s.specs {
		if n := len(changed[t]); n >= wholeReloadMin && n*wholeReloadShare >= prev.Keys(t) {
			whole[t] = true // a bulk change: one scan is cheaper than a key list
		}
	}
	fresh := make([]map[string][][]*string, len(s.specs))
	wholeRows := make([]map[string][][]*string, len(s.specs))
	for t := range s.specs {
		switch {
		case whole[t]:
			if wholeRows[t], err = s.loadTable(ctx, tx, t, nil); err != nil {
				return false, err
			}
		case len(changed[t]) > 0:
			loaded, err := s.loadTable(ctx, tx, t, changed[t])
			if err != nil {
				return false, err
			}
			fresh[t] = map[string][][]*string{}
			for k := range changed[t] {
				fresh[t][k] = loaded[k] // nil: the key is gone
			}
		}
	}
	s.cur.Store(prev.With(cur, fresh, wholeRows))
	return true, nil
}

// loadAll re-checks the triggers and reads every served table whole.
func (s *Snapshot) loadAll(ctx context.Context, tx pgx.Tx, cur int64) error {
	if !s.triggersIntact(ctx, tx) {
		return nil
	}
	tables := make([]map[string][][]*string, len(s.specs))
	for t := range s.specs {
		var err error
		if tables[t], err = s.loadTable(ctx, tx, t, nil); err != nil {
			return err
		}
	}
	s.cur.Store(guard.NewFactTables(cur, tables))
	s.loadedOnce.Do(func() { close(s.loaded) })
	return nil
}

// triggersIntact checks every mirrored table's triggers. While one does
// not match what the catalog mirrors, no copy is served at all (every
// decision reads its facts live): the guard's log INSERT refuses rows
// decided from a copy unless every mirrored table's triggers are in place,
// so a copy would only cost each decision a wasted attempt. Reported
// (OnUnmirrored, the log) and checked again on every catch-up until fixed.
func (s *Snapshot) triggersIntact(ctx context.Context, tx pgx.Tx) bool {
	problems, err := CheckTriggers(ctx, tx, s.specs)
	if err != nil {
		s.o.Log.Warn("fact snapshot: cannot check the triggers; serving no copy", "err", err)
		s.cur.Store(nil)
		return false
	}
	if s.o.OnUnmirrored != nil {
		s.o.OnUnmirrored(len(problems))
	}
	if len(problems) == 0 {
		if s.reported.Swap(false) {
			s.o.Log.Info("fact snapshot: the mirrored tables' triggers are in place again")
		}
		return true
	}
	if s.cur.Swap(nil) != nil || !s.reported.Swap(true) {
		for table, p := range problems {
			s.o.Log.Error("fact snapshot: a mirrored table's trigger does not match; no copy is served, every decision reads its facts live", "table", table, "problem", p)
		}
	}
	return false
}

// loadTable reads table t's rows: every row (keys nil) or those with the
// given keys.
func (s *Snapshot) loadTable(ctx context.Context, tx pgx.Tx, t int, keys map[string]bool) (map[string][][]*string, error) {
	sp := s.specs[t]
	cols := make([]string, 0, len(sp.Key)+len(sp.Values))
	for _, k := range sp.Key {
		cols = append(cols, k+"::text")
	}
	for _, v := range sp.Values {
		cols = append(cols, "("+v+")::text")
	}
	q := "SELECT " + strings.Join(cols, ", ") + " FROM " + sp.Name
	var args []any
	if keys != nil {
		parts := make([][]string, len(sp.Key))
		for k := range keys {
			for i, p := range strings.Split(k, guard.KeySep) {
				parts[i] = append(parts[i], p)
			}
		}
		if len(sp.Key) == 1 {
			q += " WHERE " + sp.Key[0] + " = ANY($1::text[])"
		} else {
			casts := make([]string, len(sp.Key))
			for i := range sp.Key {
				casts[i] = fmt.Sprintf("$%d::text[]", i+1)
			}
			q += " WHERE (" + strings.Join(sp.Key, ", ") + ") IN (SELECT * FROM unnest(" + strings.Join(casts, ", ") + "))"
		}
		for _, p := range parts {
			args = append(args, p)
		}
	}
	rows, err := tx.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", sp.Name, err)
	}
	defer rows.Close()
	out := map[string][][]*string{}
	nk := len(sp.Key)
	for rows.Next() {
		vals := make([]*string, nk+len(sp.Values))
		dest := make([]any, len(vals))
		for i := range vals {
			dest[i] = &vals[i]
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("load %s: %w", sp.Name, err)
		}
		k, ok := joinKey(vals[:nk], nk)
		if !ok {
			continue // a NULL key part never equals a lookup's parameter
		}
		out[k] = append(out[k], slices.Clip(vals[nk:]))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load %s: %w", sp.Name, err)
	}
	return out, nil
}

// joinKey joins key parts as guard's lookups do; ok is false when a part is
// NULL or the count is wrong.
func joinKey(parts []*string, n int) (string, bool) {
	if len(parts) != n {
		return "", false
	}
	var b strings.Builder
	for i, p := range parts {
		if p == nil {
			return "", false
		}
		if i > 0 {
			b.WriteString(guard.KeySep)
		}
		b.WriteString(*p)
	}
	return b.String(), true
}
