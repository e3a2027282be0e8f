package guardtest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/clawguard/clawguard/migrations/pgtest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/app"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/snapshot"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// outcomes counts what ObserveSnapshot reports.
type outcomes struct{ snapshot, stale atomic.Int64 }

func (o *outcomes) observe(outcome string) {
	switch outcome {
	case "snapshot":
		o.snapshot.Add(1)
	case "stale":
		o.stale.Add(1)
	}
}

// pinnedEngine is an engine deciding from a copy loaded once and never
// caught up: the stalest a replica's copy can be.
func pinnedEngine(t *testing.T, srv *testserver.Server) (*guard.Engine, *outcomes) {
	t.Helper()
	cat, err := app.BuildCatalog()
	if err != nil {
		t.Fatal(err)
	}
	snap := snapshot.New(srv.Pool, cat.Tables(), snapshot.Options{})
	if err := snap.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	o := &outcomes{}
	eng := guard.NewEngine(cat, srv.Pool, guard.Options{Snapshot: snap, ObserveSnapshot: o.observe, Batchers: 2})
	t.Cleanup(eng.Close)
	return eng, o
}

func send(w *world, from, to string) *guard.Request {
	return &guard.Request{Input: guard.Input{Action: "a2a.send", Actor: w.actor("agent:" + from), Resource: map[string]string{"to": w.sub(to)}}}
}

// TestStaleCopyNeverAnswers: a change committed after the copy was taken —
// a revoked destination, a new policy, a granted one — is decided live,
// never from the copy, however stale the copy is; and a change to any
// mirrored row (another group's) is enough to send a decision live.
func TestStaleCopyNeverAnswers(t *testing.T) {
	srv := testserver.Start(t)
	w := newWorld(t, srv)
	w.exec(`INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) VALUES ('{A}', 'b', '{B}')`)
	eng, o := pinnedEngine(t, srv)

	steps := []struct {
		name, sql string
		want      guardv1.Effect
		stale     bool
	}{
		{"copy current", ``, allow, false},
		{"destination revoked", `DELETE FROM agent_destinations WHERE agent_group_id = '{A}'`, deny, true},
		{"destination granted again", `INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) VALUES ('{A}', 'b', '{B}')`, allow, true},
		{"a policy now holds", `INSERT INTO agent_message_policies (from_agent_group_id, to_agent_group_id, approver_user_id) VALUES ('{A}', '{B}', 'telegram:dana')`, hold, true},
		{"the gate set to audit", `INSERT INTO action_settings (action, mode) VALUES ('a2a.send', 'audit')`, allow, true},
		{"the target group deleted", `DELETE FROM agent_message_policies; DELETE FROM agent_groups WHERE id = '{B}'`, deny, true},
		{"someone else's row changed", `INSERT INTO agent_groups (id, name) VALUES ('{A}-other', '{A}-other')`, deny, true},
	}
	for _, st := range steps {
		w.exec(st.sql)
		stale0 := o.stale.Load()
		resp, err := eng.Decide(ctx, send(w, "{A}:{SA}", "{B}"))
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got := resp.GetDecision().GetEffect(); got != st.want {
			t.Fatalf("%s: %v (%s), want %v", st.name, got, resp.GetDecision().GetReason(), st.want)
		}
		if wentLive := o.stale.Load() > stale0; wentLive != st.stale {
			t.Fatalf("%s: decided live after a failed revision check = %v, want %v", st.name, wentLive, st.stale)
		}
		// Whichever way it was decided, it is logged once.
		if n := w.count(`SELECT count(*) FROM decisions WHERE id = '` + resp.GetDecisionId() + `'`); n != 1 {
			t.Fatalf("%s: decision %s logged %d times", st.name, resp.GetDecisionId(), n)
		}
	}
	if o.snapshot.Load() != 1 {
		t.Fatalf("%d decisions answered from the copy, want 1 (only while it was current)", o.snapshot.Load())
	}
}

// TestASessionMovedAwayIsNotActedForFromTheCopy: the copy says which
// runner hosts a session; after the session moved, the runner it left
// cannot have its agent's actions decided from the copy (the move bumped the
// revision, so the live check says "not yours": PermissionDenied, nothing
// logged), and the runner it moved to, which the copy does not name yet, is
// confirmed live and answered.
func TestASessionMovedAwayIsNotActedForFromTheCopy(t *testing.T) {
	srv := testserver.Start(t)
	w := newWorld(t, srv)
	w.exec(`INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) VALUES ('{A}', 'b', '{B}');
		INSERT INTO runners (id) VALUES ('{R}-new')`)
	eng, o := pinnedEngine(t, srv)
	asRunner := func(runner string) *guard.Request {
		r := send(w, "{A}:{SA}", "{B}")
		r.RunnerID, r.RequireOwnedSession = w.sub(runner), true
		return r
	}
	if resp, err := eng.Decide(ctx, asRunner("{R}")); err != nil || resp.GetDecision().GetEffect() != allow || o.snapshot.Load() != 1 {
		t.Fatalf("the host, before the move: %v %v (from the copy: %d)", resp, err, o.snapshot.Load())
	}
	w.exec(`UPDATE sessions SET runner_id = '{R}-new' WHERE id = '{SA}'`)
	before := w.count(`SELECT count(*) FROM decisions`)
	if _, err := eng.Decide(ctx, asRunner("{R}")); !errors.Is(err, guard.ErrActorNotOwned) {
		t.Fatalf("the runner the session left: %v, want ErrActorNotOwned", err)
	}
	if n := w.count(`SELECT count(*) FROM decisions`); n != before {
		t.Fatalf("%d decisions logged for the runner the session left", n-before)
	}
	if resp, err := eng.Decide(ctx, asRunner("{R}-new")); err != nil || resp.GetDecision().GetEffect() != allow {
		t.Fatalf("the runner the session moved to: %v %v, want allow", resp, err)
	}
	if o.snapshot.Load() != 1 {
		t.Fatalf("%d decisions answered from the copy, want only the first", o.snapshot.Load())
	}
}

// TestAChangeBehindDisabledTriggersIsNotAnsweredFromTheCopy: a bulk load's
// DISABLE TRIGGER (or a dropped trigger) lets changes commit without moving
// the revision; the log INSERT also checks the triggers are in place, so
// the copy is not trusted from the first decision after they went.
func TestAChangeBehindDisabledTriggersIsNotAnsweredFromTheCopy(t *testing.T) {
	for name, off := range map[string]string{
		"disabled": `ALTER TABLE agent_destinations DISABLE TRIGGER ALL`,
		"dropped":  `DROP TRIGGER fact_changed ON agent_destinations`,
		"truncate trigger dropped, table truncated": `DROP TRIGGER fact_truncated ON agent_destinations`,
	} {
		t.Run(name, func(t *testing.T) {
			srv := testserver.Start(t)
			w := newWorld(t, srv)
			w.exec(`INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) VALUES ('{A}', 'b', '{B}')`)
			eng, o := pinnedEngine(t, srv)
			if resp, err := eng.Decide(ctx, send(w, "{A}:{SA}", "{B}")); err != nil || resp.GetDecision().GetEffect() != allow || o.snapshot.Load() != 1 {
				t.Fatalf("before: %v %v (from the copy: %d)", resp, err, o.snapshot.Load())
			}
			rev := dbRevision(t, srv)
			change := `DELETE FROM agent_destinations WHERE agent_group_id = '{A}'`
			if strings.Contains(name, "truncate") {
				change = `TRUNCATE agent_destinations`
			}
			w.exec(off + `; ` + change)
			if got := dbRevision(t, srv); got != rev {
				t.Fatalf("the revision moved (%d → %d): the change did not bypass the triggers", rev, got)
			}
			resp, err := eng.Decide(ctx, send(w, "{A}:{SA}", "{B}"))
			if err != nil || resp.GetDecision().GetEffect() != deny {
				t.Fatalf("after the destination went behind the triggers' back: %v %v, want deny", resp, err)
			}
			if o.stale.Load() != 1 {
				t.Fatalf("%d decisions sent live, want 1", o.stale.Load())
			}
		})
	}
}

// TestNoAllowAfterACommittedRevocation: agents on replicas A and B keep
// sending while an operator revokes and re-grants the destination; no
// decision that began after a revocation's commit returned and ended before
// the re-grant began is an ALLOW, on either replica, whatever their copies'
// lag (SPEC §10: zero allows after a committed revocation). A decision that
// overlaps the re-grant may be ordered after it.
func TestNoAllowAfterACommittedRevocation(t *testing.T) {
	a := testserver.Start(t)
	b := testserver.StartOn(t, a.URL)
	w := newWorld(t, a)
	w.exec(`INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) VALUES ('{A}', 'b', '{B}')`)
	replicas := map[string]guardv1.GuardClient{
		"A": testserver.ClientsFor(a.Conn(t, a.Token(t, "runner", w.R, ""), "")).Guard,
		"B": testserver.ClientsFor(b.Conn(t, b.Token(t, "runner", w.R, ""), "")).Guard,
	}
	req := &guardv1.DecideRequest{Action: "a2a.send", Actor: w.actor("agent:{A}:{SA}"), Resource: map[string]string{"to": w.B}}

	type decided struct {
		replica      string
		began, ended time.Time
		allow        bool
		id           string
	}
	var (
		mu      sync.Mutex
		answers []decided
		count   atomic.Int64
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for name, g := range replicas {
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					began := time.Now()
					resp, err := g.Decide(ctx, req)
					if err != nil {
						t.Error(err)
						return
					}
					d := decided{replica: name, began: began, ended: time.Now(), allow: resp.GetDecision().GetEffect() == allow, id: resp.GetDecisionId()}
					mu.Lock()
					answers = append(answers, d)
					mu.Unlock()
					count.Add(1)
				}
			}()
		}
	}
	type window struct{ revoked, regranted time.Time }
	var windows []window
	// inside counts the decisions that began after a revocation committed
	// and ended before its re-grant, checking each is no ALLOW.
	inside := func(report bool) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, d := range answers {
			for _, win := range windows {
				if d.began.After(win.revoked) && d.ended.Before(win.regranted) {
					n++
					if d.allow && report {
						t.Errorf("replica %s allowed %s, begun %v after a revocation committed and answered before the re-grant",
							d.replica, d.id, d.began.Sub(win.revoked))
					}
				}
			}
		}
		return n
	}
	// Rounds of 25 windows until enough decisions fell inside them (fewer
	// do on a loaded machine, where each takes longer).
	for round := 0; round < 8 && (round == 0 || inside(false) < 100); round++ {
		for range 25 {
			pgtest.Exec(t, a.Pool, w.sub(`DELETE FROM agent_destinations WHERE agent_group_id = '{A}'`))
			revoked := time.Now()
			waitDecisions(t, &count, 8)
			mu.Lock()
			windows = append(windows, window{revoked: revoked, regranted: time.Now()})
			mu.Unlock()
			pgtest.Exec(t, a.Pool, w.sub(`INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) VALUES ('{A}', 'b', '{B}')`))
			waitDecisions(t, &count, 8)
		}
	}
	close(stop)
	wg.Wait()
	if inside := inside(true); inside < 100 {
		t.Fatalf("only %d decisions fell inside a revoked window", inside)
	}
	// The copies did serve: most decisions skipped the facts read.
	var served float64
	for _, srv := range []*testserver.Server{a, b} {
		served += testutil.ToFloat64(srv.Deps().Metrics.SnapshotDecisionsTotal.WithLabelValues("snapshot"))
	}
	if served == 0 {
		t.Fatal("no decision was answered from a snapshot")
	}
}

// waitDecisions waits until n more decisions are answered.
func waitDecisions(t *testing.T, decided *atomic.Int64, n int64) {
	t.Helper()
	want := decided.Load() + n
	testserver.Eventually(t, 10*time.Second, "decisions to go on", func() bool { return decided.Load() >= want })
}

// TestSnapshotAndLiveReadTheSameFacts: for random worlds and random
// requests, every catalog entry the snapshot serves reads the same facts
// (and the same session row) from a caught-up copy as from the database:
// each lookup's SQL and its map reading are one declaration, and this
// keeps them one meaning.
func TestSnapshotAndLiveReadTheSameFacts(t *testing.T) {
	srv := testserver.Start(t)
	cat, err := app.BuildCatalog()
	if err != nil {
		t.Fatal(err)
	}
	snap := snapshot.New(srv.Pool, cat.Tables(), snapshot.Options{})
	eng := guard.NewEngine(cat, srv.Pool, guard.Options{})
	defer eng.Close()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	ids := []string{"g0", "g1", "g2", "g3", "g4", "gX", ""} // gX never exists
	pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
	var served []string
	for _, e := range cat.List() {
		served = append(served, e.Action)
	}
	pgtest.Exec(t, srv.Pool, `INSERT INTO runners (id) VALUES ('r0'), ('r1');
		INSERT INTO messaging_groups (id, channel_type, platform_id) VALUES ('mg0', 'telegram', '0')`)
	compared := 0
	for round := range 25 {
		// A random world: every mirrored table, rows appearing and going.
		var sql []string
		sql = append(sql, `DELETE FROM agent_groups`, `DELETE FROM action_settings`)
		for _, g := range ids[:5] {
			if rng.IntN(5) == 0 {
				continue
			}
			sql = append(sql, fmt.Sprintf(`INSERT INTO agent_groups (id, name) VALUES ('%s', '%s')`, g, g))
			if rng.IntN(3) > 0 {
				sql = append(sql, fmt.Sprintf(`INSERT INTO container_configs (agent_group_id, cli_scope, mcp_servers) VALUES ('%s', '%s', '%s')`,
					g, pick([]string{"disabled", "group", "global"}), pick([]string{`[]`, `[{"name": "fs", "command": "x"}]`,
						`[{"name": "fs", "command": "x"}, {"name": "gh", "command": "y"}]`})))
			}
			// Guarded MCP servers' settings (mcp.call's facts).
			for _, srv := range []string{"fs", "gh"} {
				if rng.IntN(2) == 0 {
					sql = append(sql, fmt.Sprintf(`INSERT INTO mcp_server_settings (agent_group_id, server, default_effect, approvals, mode) VALUES ('%s', '%s', '%s', %d, '%s')`,
						g, srv, pick([]string{"allow", "hold", "deny"}), rng.IntN(3), pick([]string{"", "audit"})))
				}
				if rng.IntN(2) == 0 {
					sql = append(sql, fmt.Sprintf(`INSERT INTO mcp_tool_settings (agent_group_id, server, tool, effect) VALUES ('%s', '%s', 'write', '%s')`,
						g, srv, pick([]string{"allow", "hold", "deny"})))
				}
			}
			for s := range 2 {
				sql = append(sql, fmt.Sprintf(`INSERT INTO sessions (id, agent_group_id, runner_id) VALUES ('s%s%d', '%s', %s)`,
					g, s, g, pick([]string{"'r0'", "'r1'", "NULL"})))
			}
		}
		for i := range 12 {
			from, to := pick(ids[:5]), pick(ids[:5])
			sql = append(sql, fmt.Sprintf(`INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id)
				SELECT '%s', 'd%d', '%s' WHERE EXISTS (SELECT 1 FROM agent_groups WHERE id = '%s') AND EXISTS (SELECT 1 FROM agent_groups WHERE id = '%s')`,
				from, i, to, from, to))
			if rng.IntN(4) == 0 {
				sql = append(sql, fmt.Sprintf(`INSERT INTO agent_destinations (agent_group_id, name, target_messaging_group_id)
					SELECT '%s', 'chat%d', 'mg0' WHERE EXISTS (SELECT 1 FROM agent_groups WHERE id = '%s')`, from, i, from))
			}
			if rng.IntN(3) == 0 {
				sql = append(sql, fmt.Sprintf(`INSERT INTO agent_message_policies (from_agent_group_id, to_agent_group_id, approver_user_id, also_approvers, approvals, mode)
					SELECT '%s', '%s', 'telegram:dana', '%s', %d, '%s'
					WHERE EXISTS (SELECT 1 FROM agent_groups WHERE id = '%s') AND EXISTS (SELECT 1 FROM agent_groups WHERE id = '%s')
					ON CONFLICT DO NOTHING`,
					from, to, pick([]string{"{}", "{telegram:eve}", "{telegram:eve,telegram:fay}"}), rng.IntN(3), pick([]string{"", "enforce", "audit", "warn"}), from, to))
			}
		}
		for _, action := range []string{"a2a.send", "agents.create", "self_mod.install_packages", "groups.get", "sessions.list"} {
			if rng.IntN(2) == 0 {
				sql = append(sql, fmt.Sprintf(`INSERT INTO action_settings (action, mode) VALUES ('%s', '%s')`, action, pick([]string{"enforce", "audit", "warn"})))
			}
		}
		pgtest.Exec(t, srv.Pool, "BEGIN; "+strings.Join(sql, ";\n")+"; COMMIT")
		if err := snap.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		tables := snap.Tables()
		for range 60 {
			in := guard.Input{Action: pick(served), Resource: map[string]string{"to": pick(ids),
				"server": pick([]string{"fs", "gh", "nope"}), "tool": pick([]string{"write", "read"})}}
			in.Payload = map[string]any{"name": pick([]string{"", "x"})}
			switch rng.IntN(4) {
			case 0:
				in.Actor = &guardv1.Actor{Kind: &guardv1.Actor_Host{Host: &guardv1.HostActor{}}}
			case 1:
				in.Actor = &guardv1.Actor{Kind: &guardv1.Actor_Human{Human: &guardv1.HumanActor{UserId: "telegram:dana"}}}
			default:
				g := pick(ids)
				in.Actor = &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: g,
					SessionId: pick([]string{"s" + g + "0", "s" + pick(ids) + "1", "", "sX"})}}}
			}
			// The server's own loops (the lease sweep) may move a session
			// meanwhile: a reading is compared only when the database's
			// revision was the copy's before and after it.
			var (
				sr, sg, lr, lg *string
				fs, fl         guard.Facts
				ok             bool
				errS, errL     error
				settled        bool
			)
			for attempt := 0; attempt < 5 && !settled; attempt++ {
				if attempt > 0 {
					if err := snap.Refresh(ctx); err != nil {
						t.Fatal(err)
					}
					tables = snap.Tables()
				}
				sr, sg, fs, ok, errS = eng.ReadFacts(ctx, srv.Pool, tables, in)
				lr, lg, fl, _, errL = eng.ReadFacts(ctx, srv.Pool, nil, in)
				settled = dbRevision(t, srv) == tables.Revision()
			}
			if !settled {
				t.Fatalf("round %d: the database's fact revision kept moving", round)
			}
			if !ok {
				continue // an entry the snapshot does not serve
			}
			if (errS != nil) != (errL != nil) {
				t.Fatalf("round %d %s %v: snapshot error %v, live error %v", round, in.Action, in.Actor, errS, errL)
			}
			if errS != nil {
				continue
			}
			e, _ := cat.Lookup(in.Action)
			if s, l := str(sr)+"/"+str(sg), str(lr)+"/"+str(lg); s != l {
				t.Fatalf("round %d %s %v: session row from the snapshot %s, live %s", round, in.Action, in.Actor, s, l)
			}
			for _, f := range e.Facts {
				if s, l := factText(fs, f.Name), factText(fl, f.Name); s != l {
					t.Fatalf("round %d %s actor %v to %q: fact %s from the snapshot %s, live %s", round, in.Action, in.Actor, in.Resource["to"], f.Name, s, l)
				}
			}
			compared++
		}
	}
	if compared < 500 {
		t.Fatalf("only %d readings compared", compared)
	}
}

func dbRevision(t *testing.T, srv *testserver.Server) int64 {
	t.Helper()
	var rev int64
	if err := srv.Pool.QueryRow(ctx, `SELECT rev FROM fact_revision`).Scan(&rev); err != nil {
		t.Fatal(err)
	}
	return rev
}

func str(p *string) string {
	if p == nil {
		return "NULL"
	}
	return *p
}

func factText(f guard.Facts, name string) string {
	if !f.Has(name) {
		return "NULL"
	}
	return f.Str(name)
}
