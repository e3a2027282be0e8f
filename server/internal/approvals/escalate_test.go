package approvals_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	osexec "os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/clawguard/clawguard/migrations/pgtest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/config"
	"github.com/clawguard/clawguard/server/internal/metrics"
)

// replica is one server replica's approvals service and its metrics.
type replica struct {
	svc *approvals.Service
	m   *metrics.Metrics
}

func newReplica(pool *pgxpool.Pool) replica {
	m := metrics.NewMetrics(prometheus.NewRegistry())
	return replica{approvals.New(pool, m, slog.New(slog.NewTextHandler(io.Discard, nil)), config.Default()), m}
}

func (r replica) steps(step string) int {
	return int(testutil.ToFloat64(r.m.EscalationStepsTotal.WithLabelValues(step)))
}

// escalationFixture: the seed's cast, and the catalog action x.act set to
// remind after a minute and add rando and ag-2's admins after two.
func escalationFixture(t *testing.T, pool *pgxpool.Pool) {
	exec(t, pool, `INSERT INTO action_settings (action, remind_after_s, escalate_after_s, escalate_to) VALUES ('x.act', 60, 120, $1)`,
		[]string{rando, "group:ag-2"})
}

func mayResolve(t *testing.T, pool *pgxpool.Pool, id, user string) bool {
	t.Helper()
	h, err := approvals.GetHold(context.Background(), pool, id)
	if err != nil {
		t.Fatal(err)
	}
	ok, err := approvals.MayResolve(context.Background(), pool, h.GetApproverRule(), h.GetApproverScope(), user)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// sweepConcurrently runs EscalateDue on every replica at once, rounds times.
func sweepConcurrently(t *testing.T, rounds int, replicas ...replica) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, rounds*len(replicas))
	for _, r := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				if _, err := r.svc.EscalateDue(context.Background()); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestEscalationEachStepOnceAcrossReplicas: two replicas sweep one
// database at the same time; every hold is reminded once and escalated
// once (counted as events, the notices every bridge and webhook sends),
// and an escalate_to approver may resolve only after the escalation.
func TestEscalationEachStepOnceAcrossReplicas(t *testing.T) {
	t.Parallel()
	pool := fixture(t)
	escalationFixture(t, pool)
	a, b := newReplica(pool), newReplica(pool)
	const holds = 60 // more than one claim batch
	var ids []string
	for range holds {
		res := create(t, a.svc, pool, approvals.CreateRequest{Kind: "install_packages", CatalogAction: "x.act", AgentGroupID: "ag-1", Rule: adminsOf("ag-1", "")})
		ids = append(ids, res.Hold.GetId())
	}
	// The plan is fixed at creation, on the database's clock.
	if n := count(t, pool, `SELECT count(*) FROM holds WHERE remind_at = created_at + interval '60 seconds'
		AND escalate_at = created_at + interval '120 seconds' AND escalate_to = $1`, []string{rando, "group:ag-2"}); n != holds {
		t.Fatalf("%d holds with the plan, want %d", n, holds)
	}
	// Nothing is due yet.
	sweepConcurrently(t, 2, a, b)
	if n := count(t, pool, `SELECT count(*) FROM hold_events WHERE type IN ('reminded', 'escalated')`); n != 0 {
		t.Fatalf("%d steps taken before they were due", n)
	}
	if mayResolve(t, pool, ids[0], rando) || mayResolve(t, pool, ids[0], otherAdmin) {
		t.Fatal("an escalate_to approver may resolve before the escalation")
	}

	// A minute passes (for the database): the reminder is due.
	exec(t, pool, `UPDATE holds SET created_at = created_at - interval '61 seconds', remind_at = remind_at - interval '61 seconds', escalate_at = escalate_at - interval '61 seconds'`)
	sweepConcurrently(t, 3, a, b)
	if n := count(t, pool, `SELECT count(*) FROM hold_events WHERE type = 'reminded'`); n != holds {
		t.Fatalf("%d reminders, want %d (one per hold)", n, holds)
	}
	if n := count(t, pool, `SELECT count(DISTINCT hold_id) FROM hold_events WHERE type = 'reminded'`); n != holds {
		t.Fatalf("reminders reached %d holds, want %d", n, holds)
	}
	if n := count(t, pool, `SELECT count(*) FROM hold_events WHERE type = 'escalated'`); n != 0 {
		t.Fatalf("escalated %d holds before escalate_after", n)
	}
	if got := a.steps("remind") + b.steps("remind"); got != holds {
		t.Fatalf("remind steps counted %d, want %d", got, holds)
	}
	if mayResolve(t, pool, ids[0], rando) {
		t.Fatal("a reminder made an escalate_to approver eligible")
	}

	// Another minute: the escalation.
	exec(t, pool, `UPDATE holds SET escalate_at = escalate_at - interval '60 seconds'`)
	sweepConcurrently(t, 3, a, b)
	if n := count(t, pool, `SELECT count(*) FROM hold_events WHERE type = 'escalated'`); n != holds {
		t.Fatalf("%d escalations, want %d", n, holds)
	}
	if got := a.steps("escalate") + b.steps("escalate"); got != holds {
		t.Fatalf("escalate steps counted %d, want %d", got, holds)
	}
	h, err := approvals.GetHold(context.Background(), pool, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	// rando by name, ag-2's admin through the group.
	if want := []string{otherAdmin, rando}; !slices.Equal(h.GetEscalatedTo(), want) || h.GetEscalatedAt() == nil || h.GetRemindedAt() == nil {
		t.Fatalf("escalation state: to %v at %v reminded %v", h.GetEscalatedTo(), h.GetEscalatedAt(), h.GetRemindedAt())
	}
	if !mayResolve(t, pool, ids[0], rando) || !mayResolve(t, pool, ids[0], otherAdmin) {
		t.Fatal("escalate_to approvers may not resolve after the escalation")
	}
	if mayResolve(t, pool, ids[0], deliveree) {
		t.Fatal("the escalation made someone else eligible")
	}
	// The event carries the escalated hold, so a bridge cards the new approvers.
	var body []byte
	if err := pool.QueryRow(context.Background(), `SELECT hold FROM hold_events WHERE hold_id = $1 AND type = 'escalated'`, ids[0]).Scan(&body); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), rando) {
		t.Fatalf("escalated event's hold does not name the new approvers: %s", body)
	}
	// Issue 41 item 11: the power came with the role that escalated them,
	// and goes with it; rando, named by the plan, keeps it.
	exec(t, pool, `DELETE FROM user_roles WHERE user_id = $1 AND agent_group_id = 'ag-2'`, otherAdmin)
	if mayResolve(t, pool, ids[1], otherAdmin) {
		t.Fatal("an approver escalated as ag-2's admin may still resolve after losing that role")
	}
	if _, err := a.svc.Resolve(context.Background(), approvals.Resolution{HoldID: ids[1], Outcome: guardv1.Outcome_OUTCOME_APPROVE, Clicker: otherAdmin, SteppedUp: true}); err == nil {
		t.Fatal("an approver who lost the role that escalated them approved")
	}
	if !mayResolve(t, pool, ids[1], rando) {
		t.Fatal("an approver the plan names lost the power with someone else's role")
	}
	// An approval by an escalated approver resolves it (a one-approval hold).
	if _, err := a.svc.Resolve(context.Background(), approvals.Resolution{HoldID: ids[0], Outcome: guardv1.Outcome_OUTCOME_APPROVE, Clicker: rando, SteppedUp: true}); err != nil {
		t.Fatalf("escalated approver's approval: %v", err)
	}
}

// TestEscalationUndoneWhenTheReplicaDiesBeforeCommit: a replica that
// claimed a step and wrote its event, then died before committing, leaves
// nothing; another replica takes the step once, and the first one, back,
// takes it no more.
func TestEscalationUndoneWhenTheReplicaDiesBeforeCommit(t *testing.T) {
	t.Parallel()
	pool := fixture(t)
	escalationFixture(t, pool)
	a, b := newReplica(pool), newReplica(pool)
	res := create(t, a.svc, pool, approvals.CreateRequest{Kind: "install_packages", CatalogAction: "x.act", AgentGroupID: "ag-1", Rule: adminsOf("ag-1", "")})
	exec(t, pool, `UPDATE holds SET remind_at = now() - interval '1 second' WHERE id = $1`, res.Hold.GetId())

	ctx, die := context.WithCancel(context.Background())
	claimed := false
	a.svc.BeforeStepCommit = func(ctx context.Context, step string, hs []*guardv1.Hold) error {
		claimed = len(hs) == 1 && hs[0].GetId() == res.Hold.GetId() && hs[0].GetRemindedAt() != nil
		die() // the process goes away between the claim and its commit
		return ctx.Err()
	}
	if _, err := a.svc.EscalateDue(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("the dying replica's sweep: %v", err)
	}
	if !claimed {
		t.Fatal("the dying replica did not claim the reminder")
	}
	if n := count(t, pool, `SELECT count(*) FROM hold_events WHERE type = 'reminded'`); n != 0 {
		t.Fatalf("a reminder survived its replica's death: %d", n)
	}
	// The dead replica's connection is dropped when its context ends; the
	// server aborts its transaction once it sees the connection gone. Until
	// then its row lock stands (SKIP LOCKED passes over it), as it would
	// until a crashed replica's connection times out.
	waitNoOpenTransaction(t, pool)
	if n, err := b.svc.EscalateDue(context.Background()); err != nil || n != 1 {
		t.Fatalf("the other replica took %d steps (%v), want 1", n, err)
	}
	a.svc.BeforeStepCommit = nil
	sweepConcurrently(t, 2, a, b)
	if n := count(t, pool, `SELECT count(*) FROM hold_events WHERE type = 'reminded' AND hold_id = $1`, res.Hold.GetId()); n != 1 {
		t.Fatalf("%d reminders, want 1", n)
	}
}

// TestEscalationAcrossAReplicaSIGKILL: a replica process claims a
// reminder and an escalation and is SIGKILLed before it commits; the other
// replica takes each step exactly once.
func TestEscalationAcrossAReplicaSIGKILL(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	exec(t, pool, `INSERT INTO agent_groups (id, name) VALUES ('ag-1', 'one'), ('ag-2', 'two')`)
	for _, u := range []string{owner, otherAdmin, rando} {
		exec(t, pool, `INSERT INTO users (id) VALUES ($1)`, u)
	}
	exec(t, pool, `INSERT INTO user_roles (user_id, role, agent_group_id) VALUES ($1, 'owner', NULL), ($2, 'admin', 'ag-2')`, owner, otherAdmin)
	escalationFixture(t, pool)
	b := newReplica(pool)
	var ids []string
	for range 3 {
		res := create(t, b.svc, pool, approvals.CreateRequest{Kind: "install_packages", CatalogAction: "x.act", AgentGroupID: "ag-1", Rule: adminsOf("ag-1", "")})
		ids = append(ids, res.Hold.GetId())
	}
	exec(t, pool, `UPDATE holds SET remind_at = now() - interval '1 second', escalate_at = now() - interval '1 second'`)

	// Replica A: this test binary again, as a child that sweeps and stops
	// inside the step's transaction, saying so on stdout.
	cmd := osexec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "ESCALATION_CHILD_DB="+url)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	stopped := false
	for lines.Scan() {
		if lines.Text() == "claimed remind 3" {
			stopped = true
			break
		}
	}
	if !stopped {
		_ = cmd.Process.Kill()
		t.Fatalf("the child never claimed the reminders: %v", cmd.Wait())
	}
	// While A holds its claims uncommitted, B skips the locked holds.
	if n, err := b.svc.EscalateDue(context.Background()); err != nil || n != 0 {
		t.Fatalf("B took %d steps of holds A holds (%v)", n, err)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = cmd.Wait()
	// The database ends A's transaction when its connection drops; until
	// then B finds the holds locked. Sweep as every replica does until the
	// steps are taken (bounded).
	deadline := time.Now().Add(30 * time.Second)
	for count(t, pool, `SELECT count(*) FROM hold_events WHERE type IN ('reminded', 'escalated')`) < 2*len(ids) {
		if time.Now().After(deadline) {
			t.Fatal("the steps A died holding were never taken")
		}
		if _, err := b.svc.EscalateDue(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	sweepConcurrently(t, 3, b, newReplica(pool))
	for _, id := range ids {
		if n := count(t, pool, `SELECT count(*) FROM hold_events WHERE hold_id = $1 AND type = 'reminded'`, id); n != 1 {
			t.Fatalf("hold %s reminded %d times", id, n)
		}
		if n := count(t, pool, `SELECT count(*) FROM hold_events WHERE hold_id = $1 AND type = 'escalated'`, id); n != 1 {
			t.Fatalf("hold %s escalated %d times", id, n)
		}
	}
	if b.steps("remind") != len(ids) || b.steps("escalate") != len(ids) {
		t.Fatalf("B counted %d reminders and %d escalations, want %d each", b.steps("remind"), b.steps("escalate"), len(ids))
	}
	if !mayResolve(t, pool, ids[0], rando) {
		t.Fatal("the escalation B took did not add rando")
	}
}

// escalationSweepChild is replica A of TestEscalationAcrossAReplicaSIGKILL:
// the test binary re-run with ESCALATION_CHILD_DB set (TestMain sends it
// here instead of the tests). It claims the due steps, says so, and waits
// in the claim's transaction to be killed.
func escalationSweepChild(url string) int {
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		os.Stderr.WriteString("child: " + err.Error() + "\n")
		return 1
	}
	a := newReplica(pool)
	a.svc.BeforeStepCommit = func(ctx context.Context, step string, hs []*guardv1.Hold) error {
		os.Stdout.WriteString("claimed " + step + " " + strconv.Itoa(len(hs)) + "\n")
		<-ctx.Done() // killed here
		return ctx.Err()
	}
	_, err = a.svc.EscalateDue(context.Background())
	os.Stderr.WriteString("child: the sweep returned instead of being killed: " + fmt.Sprint(err) + "\n")
	return 1
}

// TestEscalationPlanFromPolicy: a message policy's plan wins over its
// action's for the holds it makes; without one, the action's applies.
func TestEscalationPlanFromPolicy(t *testing.T) {
	t.Parallel()
	pool := fixture(t)
	a := newReplica(pool)
	exec(t, pool, `INSERT INTO action_settings (action, remind_after_s) VALUES ('a2a.send', 600)`)
	exec(t, pool, `INSERT INTO agent_message_policies (from_agent_group_id, to_agent_group_id, approver_user_id, remind_after_s, escalate_after_s, escalate_to)
		VALUES ('ag-1', 'ag-2', $1, 30, 90, $2)`, rando, []string{owner})
	pol := create(t, a.svc, pool, approvals.CreateRequest{Kind: "a2a_message_gate", CatalogAction: "a2a.send", AgentGroupID: "ag-1",
		Rule: exclusive(rando), Resource: map[string]string{"to": "ag-2"}})
	if n := count(t, pool, `SELECT count(*) FROM holds WHERE id = $1 AND remind_at = created_at + interval '30 seconds'
		AND escalate_at = created_at + interval '90 seconds' AND escalate_to = $2`, pol.Hold.GetId(), []string{owner}); n != 1 {
		t.Fatal("the policy's plan was not taken")
	}
	if pol.Hold.GetRemindAt() == nil || len(pol.Hold.GetEscalateTo()) != 1 {
		t.Fatalf("the hold does not show its plan: %v", pol.Hold)
	}
	// The exclusive rule keeps the owner out until the escalation adds them.
	if mayResolve(t, pool, pol.Hold.GetId(), owner) {
		t.Fatal("an owner may resolve an exclusive hold before its escalation")
	}
	exec(t, pool, `UPDATE holds SET escalate_at = now() - interval '1 second' WHERE id = $1`, pol.Hold.GetId())
	if _, err := a.svc.EscalateDue(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !mayResolve(t, pool, pol.Hold.GetId(), owner) {
		t.Fatal("the escalation did not add the owner")
	}
	other := create(t, a.svc, pool, approvals.CreateRequest{Kind: "a2a_message_gate", CatalogAction: "a2a.send", AgentGroupID: "ag-2",
		Rule: exclusive(rando), Resource: map[string]string{"to": "ag-1"}})
	if n := count(t, pool, `SELECT count(*) FROM holds WHERE id = $1 AND remind_at = created_at + interval '600 seconds' AND escalate_at IS NULL`, other.Hold.GetId()); n != 1 {
		t.Fatal("a hold no policy plans did not take its action's plan")
	}
}

// TestEscalationNoticesOnceOnEveryReplicasWatch: two server replicas on one
// database, each running its own sweep in the background; a Watch on each
// sees every hold's reminder and escalation exactly once.
func TestEscalationNoticesOnceOnEveryReplicasWatch(t *testing.T) {
	t.Parallel()
	a, wa, wb := twoWatchedReplicas(t)
	escalationFixture(t, a.Pool)
	const holds = 10
	for range holds {
		createOn(t, a, approvals.CreateRequest{Kind: "install_packages", CatalogAction: "x.act", AgentGroupID: "ag-1", Rule: adminsOf("ag-1", "")})
	}
	// Both steps are due now (the database's clock); both replicas' sweeps race.
	exec(t, a.Pool, `UPDATE holds SET remind_at = now() - interval '1 second', escalate_at = now() - interval '1 second'`)
	wa.waitFor(t, 3*holds)
	wb.waitFor(t, 3*holds)
	// More sweeps, then a marker hold: its requested event comes after
	// anything those sweeps could have written.
	for range 2 {
		if _, err := a.Deps().Approvals.EscalateDue(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	marker := createOn(t, a, approvals.CreateRequest{Kind: "install_packages", AgentGroupID: "ag-1", Title: "marker"})
	for name, w := range map[string]*watcher{"A": wa, "B": wb} {
		evs := w.waitFor(t, 3*holds+1)
		seen := map[string]int{}
		for _, ev := range evs {
			if ev.GetHold().GetId() == marker.GetId() {
				break
			}
			seen[ev.GetType().String()]++
			if ev.GetType() == guardv1.EventType_EVENT_TYPE_ESCALATED && !slices.Equal(ev.GetHold().GetEscalatedTo(), []string{otherAdmin, rando}) {
				t.Errorf("replica %s: escalated to %v", name, ev.GetHold().GetEscalatedTo())
			}
		}
		if seen["EVENT_TYPE_REMINDED"] != holds || seen["EVENT_TYPE_ESCALATED"] != holds {
			t.Fatalf("replica %s's Watch: %v, want %d reminders and %d escalations", name, seen, holds, holds)
		}
	}
}

// waitNoOpenTransaction waits until no other session of this database is
// inside a transaction (a dropped connection's is aborted by the server
// shortly after it sees the connection gone).
func waitNoOpenTransaction(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var open int
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL`).Scan(&open)
		if err != nil {
			t.Fatal(err)
		}
		if open == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d transactions still open after 10s", open)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
