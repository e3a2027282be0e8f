package retention_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/snapshot"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/clawguard/clawguard/migrations/pgtest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/config"
	"github.com/clawguard/clawguard/server/internal/retention"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// noRetention turns the server's own loop off, so the test's explicit
// prunes are the only ones.
func noRetention(c *config.Config) { c.DecisionRetention, c.EventRetention = 0, 0 }

const owner = "slack:owner"

func exec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func createHold(t *testing.T, srv *testserver.Server, title string) string {
	t.Helper()
	var res approvals.CreateResult
	err := pgx.BeginFunc(context.Background(), srv.Pool, func(tx pgx.Tx) error {
		var err error
		res, err = srv.Deps().Approvals.CreateHoldTx(context.Background(), tx, approvals.CreateRequest{Kind: "install_packages", Title: title})
		return err
	})
	if err != nil || !res.Created {
		t.Fatalf("create hold: %v %+v", err, res)
	}
	return res.Hold.GetId()
}

func approve(t *testing.T, srv *testserver.Server, id string) {
	t.Helper()
	if _, err := srv.Deps().Approvals.Resolve(context.Background(), approvals.Resolution{
		HoldID: id, Outcome: guardv1.Outcome_OUTCOME_APPROVE, Clicker: owner,
	}); err != nil {
		t.Fatalf("approve %s: %v", id, err)
	}
}

func cursorOf(t *testing.T, srv *testserver.Server, id, typ string) int64 {
	t.Helper()
	var c int64
	if err := srv.Pool.QueryRow(context.Background(), `SELECT cursor FROM hold_events WHERE hold_id = $1 AND type = $2`, id, typ).Scan(&c); err != nil {
		t.Fatalf("cursor of %s %s: %v", id, typ, err)
	}
	return c
}

// collect reads a Watch stream until it has n events or fails.
func collect(t *testing.T, c testserver.Clients, req *guardv1.WatchRequest, n int) ([]*guardv1.WatchResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := c.Approvals.Watch(ctx, req)
	if err != nil {
		return nil, err
	}
	var evs []*guardv1.WatchResponse
	for len(evs) < n {
		ev, err := stream.Recv()
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

func TestHoldEventsPrunedPendingKeptWatchRefusesPrunedCursor(t *testing.T) {
	srv := testserver.Start(t, noRetention)
	ctx := context.Background()
	exec(t, srv.Pool, `INSERT INTO users (id) VALUES ($1)`, owner)
	exec(t, srv.Pool, `INSERT INTO user_roles (user_id, role, agent_group_id, granted_at) VALUES ($1, 'owner', NULL, now() - interval '1 hour')`, owner)

	done1, done2, pending := createHold(t, srv, "one"), createHold(t, srv, "two"), createHold(t, srv, "pending")
	approve(t, srv, done1)
	approve(t, srv, done2)
	// Age every event but done2's resolution past retention.
	exec(t, srv.Pool, `UPDATE hold_events SET created_at = now() - interval '40 days'
		WHERE hold_id IN ($1, $3) OR (hold_id = $2 AND type = 'requested')`, done1, done2, pending)
	fresh := createHold(t, srv, "fresh")
	keptPending := cursorOf(t, srv, pending, "requested")
	done2Resolved := cursorOf(t, srv, done2, "resolved")
	freshRequested := cursorOf(t, srv, fresh, "requested")
	watermark := cursorOf(t, srv, done1, "resolved") // the highest pruned cursor
	firstCursor := cursorOf(t, srv, done1, "requested")
	holdsBefore := count(t, srv.Pool, `SELECT count(*) FROM holds`)

	// Batch of 1 and a loop: the bounded batches add up.
	var pruned int64
	for {
		n, err := approvals.PruneHoldEvents(ctx, srv.Pool, time.Now().Add(-30*24*time.Hour), 1)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		pruned += n
	}
	if pruned != 3 {
		t.Fatalf("pruned %d events, want 3 (done1 requested+resolved, done2 requested)", pruned)
	}
	if n := count(t, srv.Pool, `SELECT count(*) FROM hold_events WHERE hold_id = $1 AND type = 'requested'`, pending); n != 1 {
		t.Fatal("a pending hold's old requested event was pruned")
	}
	if n := count(t, srv.Pool, `SELECT count(*) FROM hold_events`); n != 3 {
		t.Fatalf("%d events left, want 3 (pending requested, done2 resolved, fresh requested)", n)
	}
	if n := count(t, srv.Pool, `SELECT count(*) FROM holds`); n != holdsBefore {
		t.Fatalf("holds touched: %d, was %d", n, holdsBefore)
	}
	if got, err := approvals.PrunedThrough(ctx, srv.Pool); err != nil || got != watermark {
		t.Fatalf("watermark %d (%v), want %d", got, err, watermark)
	}

	op := srv.Operator(t)
	// A cursor below the watermark: refused, naming where to resume.
	_, err := collect(t, op, &guardv1.WatchRequest{AfterCursor: firstCursor}, 1)
	if status.Code(err) != codes.OutOfRange {
		t.Fatalf("watch from a pruned cursor: %v, want OutOfRange", err)
	}
	want := "cursor " + strconv.FormatInt(firstCursor, 10) + " was pruned; the oldest retained is " + strconv.FormatInt(watermark, 10)
	if !strings.Contains(status.Convert(err).Message(), want) {
		t.Fatalf("message %q, want it to contain %q", status.Convert(err).Message(), want)
	}
	// From the watermark: everything after it, nothing skipped.
	evs, err := collect(t, op, &guardv1.WatchRequest{AfterCursor: watermark}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if evs[0].GetCursor() != done2Resolved || evs[1].GetCursor() != freshRequested {
		t.Fatalf("from the watermark got %d, %d; want %d, %d", evs[0].GetCursor(), evs[1].GetCursor(), done2Resolved, freshRequested)
	}
	// after_cursor 0 replays all retained events, the old pending one included.
	evs, err = collect(t, op, &guardv1.WatchRequest{AfterCursor: 0}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if evs[0].GetCursor() != keptPending || evs[0].GetHold().GetId() != pending {
		t.Fatalf("replay of retained events starts at %d, want the pending hold's %d", evs[0].GetCursor(), keptPending)
	}
	// from_now is unaffected.
	if _, err := collect(t, op, &guardv1.WatchRequest{FromNow: true}, 0); err != nil {
		t.Fatal(err)
	}
}

func TestDecisionsPrunedRecentAndCitableKept(t *testing.T) {
	srv := testserver.Start(t, noRetention)
	ctx := context.Background()
	insert := func(id, age string) {
		exec(t, srv.Pool, `INSERT INTO decisions (id, at, action, actor, actor_kind, effect)
			VALUES ($1, now() - $2::interval, 'cli_command', '{}', 'system', 'allow')`, id, age)
	}
	for i := range 12 {
		insert("old-"+strconv.Itoa(i), "40 days")
	}
	// In the first hour of a UTC day "an hour ago" is yesterday, which a
	// fresh database has no partition for (0160 makes today's on).
	exec(t, srv.Pool, `SELECT decisions_ensure_partitions((now() AT TIME ZONE 'UTC')::date - 1, (now() AT TIME ZONE 'UTC')::date)`)
	insert("recent", "1 hour")
	insert("citable", "30 seconds")

	n, err := guard.PruneDecisions(ctx, srv.Pool, time.Now().Add(-30*24*time.Hour), 5)
	if err != nil || n != 5 {
		t.Fatalf("one batch pruned %d (%v), want 5", n, err)
	}
	p := &retention.Pruner{
		DB: srv.Pool, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		DecisionRetention: 30 * 24 * time.Hour, CitationWindow: 2 * time.Minute, Batch: 5,
	}
	if err := p.PruneOnce(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if left := count(t, srv.Pool, `SELECT count(*) FROM decisions WHERE id LIKE 'old-%'`); left != 0 {
		t.Fatalf("%d old decisions left after the batches", left)
	}
	if left := count(t, srv.Pool, `SELECT count(*) FROM decisions`); left != 2 {
		t.Fatalf("%d decisions left, want recent + citable", left)
	}

	// A retention shorter than 10 citation windows is clamped: with a
	// one-day window the clamp is ten days, so the partition of a day twelve
	// days ago is dropped whole and that of eight days ago stays.
	day := func(ago int) string {
		return "decisions_" + guard.Day(time.Now()).AddDate(0, 0, -ago).Format("20060102")
	}
	exec(t, srv.Pool, `SELECT decisions_ensure_partitions(current_date - 12, current_date - 8)`)
	insert("twelve-days", "12 days")
	insert("eight-days", "8 days")
	p.DecisionRetention, p.CitationWindow = time.Nanosecond, 24*time.Hour
	if err := p.PruneOnce(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if n := count(t, srv.Pool, `SELECT count(*) FROM decisions WHERE id = 'twelve-days'`); n != 0 {
		t.Fatal("decision past the clamped retention kept")
	}
	if n := count(t, srv.Pool, `SELECT count(*) FROM pg_class WHERE relname = '`+day(12)+`'`); n != 0 {
		t.Fatalf("partition %s past retention not dropped", day(12))
	}
	if n := count(t, srv.Pool, `SELECT count(*) FROM decisions_default`); n != 0 {
		t.Fatalf("%d rows went to the default partition, want all in their day's", n)
	}
	for _, id := range []string{"eight-days", "recent", "citable"} {
		if n := count(t, srv.Pool, `SELECT count(*) FROM decisions WHERE id = '`+id+`'`); n != 1 {
			t.Fatalf("decision %s inside the clamped retention was pruned", id)
		}
	}
	p.CitationWindow = 2 * time.Minute

	// 0 keeps forever.
	insert("ancient", "400 days")
	p.DecisionRetention = 0
	if err := p.PruneOnce(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if n := count(t, srv.Pool, `SELECT count(*) FROM decisions WHERE id = 'ancient'`); n != 1 {
		t.Fatal("retention 0 pruned a decision")
	}
}

// TestServerLoopPrunes: a replica started with retention set prunes on its
// own (the wiring), leaving recent rows alone.
func TestServerLoopPrunes(t *testing.T) {
	first := testserver.Start(t, noRetention)
	exec(t, first.Pool, `INSERT INTO decisions (id, at, action, actor, actor_kind, effect) VALUES
		('old', now() - interval '3 days', 'cli_command', '{}', 'system', 'allow'),
		('new', now(), 'cli_command', '{}', 'system', 'allow')`)
	exec(t, first.Pool, `INSERT INTO hold_events (hold_id, type, hold, created_at) VALUES
		('gone-hold', 'requested', '{}', now() - interval '3 hours'),
		('new-hold', 'requested', '{}', now())`)
	testserver.StartOn(t, first.URL, func(c *config.Config) {
		c.DecisionRetention, c.EventRetention = time.Hour, time.Hour
	})
	testserver.Eventually(t, 10*time.Second, "the server's retention loop to prune", func() bool {
		return count(t, first.Pool, `SELECT count(*) FROM decisions WHERE id = 'old'`)+
			count(t, first.Pool, `SELECT count(*) FROM hold_events WHERE hold_id = 'gone-hold'`) == 0
	})
	if count(t, first.Pool, `SELECT count(*) FROM decisions WHERE id = 'new'`) != 1 ||
		count(t, first.Pool, `SELECT count(*) FROM hold_events WHERE hold_id = 'new-hold'`) != 1 {
		t.Fatal("the retention loop pruned recent rows")
	}
}

// TestWebhookSkipsPrunedEvents: a webhook whose stored cursor was pruned
// (the URL was unset for longer than retention) carries on from the oldest
// retained event instead of failing forever.
func TestWebhookSkipsPrunedEvents(t *testing.T) {
	var (
		mu  sync.Mutex
		got []string
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, r.Header.Get("X-Clawguard-Cursor"))
	}))
	defer hook.Close()
	secretFile := filepath.Join(t.TempDir(), "webhook.secret")
	if err := os.WriteFile(secretFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	first := testserver.Start(t, noRetention)
	exec(t, first.Pool, `INSERT INTO hold_events (hold_id, type, hold, created_at) VALUES
		('h1', 'requested', '{}', now() - interval '3 hours'),
		('h2', 'requested', '{}', now() - interval '3 hours'),
		('h3', 'requested', '{}', now())`)
	var c1, c3 int64
	if err := first.Pool.QueryRow(context.Background(), `SELECT min(cursor), max(cursor) FROM hold_events`).Scan(&c1, &c3); err != nil {
		t.Fatal(err)
	}
	exec(t, first.Pool, `INSERT INTO webhook_progress (url, cursor) VALUES ($1, $2)`, hook.URL, c1) // c1 < the watermark (c2)
	if n, err := approvals.PruneHoldEvents(context.Background(), first.Pool, time.Now().Add(-time.Hour), 10); err != nil || n != 2 {
		t.Fatalf("pruned %d (%v), want 2", n, err)
	}
	testserver.StartOn(t, first.URL, noRetention, func(c *config.Config) { c.WebhookURL, c.WebhookSecretFile = hook.URL, secretFile })
	var posted []string
	testserver.Eventually(t, 10*time.Second, "the webhook to post the retained event", func() bool {
		mu.Lock()
		defer mu.Unlock()
		posted = append([]string(nil), got...)
		return len(posted) > 0
	})
	if len(posted) != 1 || posted[0] != strconv.FormatInt(c3, 10) {
		t.Fatalf("webhook posted cursors %v, want only %d", posted, c3)
	}
}

func TestChatOutboxPrunedPastEventRetention(t *testing.T) {
	srv := testserver.Start(t, noRetention)
	exec(t, srv.Pool, `INSERT INTO chat_outbox (channel_type, platform_id, kind, text, created_at) VALUES
		('telegram', '1', 'reply', 'old', now() - interval '2 hours'), ('telegram', '1', 'reply', 'new', now())`)
	p := &retention.Pruner{DB: srv.Pool, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), EventRetention: time.Hour, CitationWindow: time.Minute}
	if err := p.PruneOnce(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if n := count(t, srv.Pool, `SELECT count(*) FROM chat_outbox WHERE text = 'old'`); n != 0 {
		t.Fatalf("%d old chat messages kept past the event retention", n)
	}
	if n := count(t, srv.Pool, `SELECT count(*) FROM chat_outbox WHERE text = 'new'`); n != 1 {
		t.Fatalf("the recent chat message was pruned (%d left)", n)
	}
}

// TestPartitionsMadeAhead: the loop keeps today and the next
// PartitionsAhead days partitioned, so the default partition (an insert
// never fails) stays empty while the loop runs.
func TestPartitionsMadeAhead(t *testing.T) {
	srv := testserver.Start(t, noRetention)
	ctx := context.Background()
	last := "decisions_" + guard.Day(time.Now()).AddDate(0, 0, guard.PartitionsAhead).Format("20060102")
	exec(t, srv.Pool, `DROP TABLE `+last)
	p := &retention.Pruner{DB: srv.Pool, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), CitationWindow: time.Minute}
	if err := p.PruneOnce(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if n := count(t, srv.Pool, `SELECT count(*) FROM pg_inherits WHERE inhrelid = to_regclass('`+last+`')`); n != 1 {
		t.Fatalf("partition %s not made ahead", last)
	}
	exec(t, srv.Pool, `INSERT INTO decisions (id, at, action, actor, actor_kind, effect)
		VALUES ('ahead', now() + interval '2 days', 'cli_command', '{}', 'system', 'allow')`)
	if n := count(t, srv.Pool, `SELECT count(*) FROM decisions_default`); n != 0 {
		t.Fatal("a decision two days ahead went to the default partition")
	}
}

// TestPartitionOfOlderRowsDropped: the partition 0160 gives rows older than
// the days it partitions (decisions_before_DAY) is dropped whole once
// retention passes DAY, and not before.
func TestPartitionOfOlderRowsDropped(t *testing.T) {
	srv := testserver.Start(t, noRetention)
	ctx := context.Background()
	end := guard.Day(time.Now()).AddDate(0, 0, -20)
	name := "decisions_before_" + end.Format("20060102")
	exec(t, srv.Pool, `CREATE TABLE `+name+` PARTITION OF decisions FOR VALUES FROM (MINVALUE) TO ('`+end.Format(time.RFC3339)+`')`)
	exec(t, srv.Pool, `INSERT INTO decisions (id, at, action, actor, actor_kind, effect)
		VALUES ('older', now() - interval '25 days', 'cli_command', '{}', 'system', 'allow')`)
	p := &retention.Pruner{DB: srv.Pool, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		DecisionRetention: 30 * 24 * time.Hour, CitationWindow: time.Minute}
	if err := p.PruneOnce(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if n := count(t, srv.Pool, `SELECT count(*) FROM decisions WHERE id = 'older' AND tableoid = '`+name+`'::regclass`); n != 1 {
		t.Fatal("the partition of older rows was dropped before retention passed its end")
	}
	p.DecisionRetention = 10 * 24 * time.Hour
	if err := p.PruneOnce(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if n := count(t, srv.Pool, `SELECT count(*) FROM pg_class WHERE relname = '`+name+`'`); n != 0 {
		t.Fatalf("%s past retention not dropped", name)
	}
}

// TestFactChangesPrunedWholeRevisionsOldestFirst: a snapshot catching up
// takes the oldest revision it finds as complete, so pruning deletes whole
// revisions, oldest first, at most a batch of them per statement, and
// keeps every revision recorded since the cutoff.
func TestFactChangesPrunedWholeRevisionsOldestFirst(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), pgtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for i := range 5 { // five revisions of three rows each
		exec(t, pool, fmt.Sprintf(`INSERT INTO agent_groups (id, name) VALUES ('g%[1]d-a', 'g%[1]d-a'), ('g%[1]d-b', 'g%[1]d-b'), ('g%[1]d-c', 'g%[1]d-c')`, i))
	}
	// The first four are old.
	exec(t, pool, `UPDATE fact_changes SET at = now() - interval '2 hours' WHERE rev <= 4`)
	revs := func() string {
		var s string
		if err := pool.QueryRow(context.Background(), `SELECT string_agg(rev || 'x' || n, ' ' ORDER BY rev) FROM
			(SELECT rev, count(*) AS n FROM fact_changes GROUP BY rev) AS r`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if got := revs(); got != "1x3 2x3 3x3 4x3 5x3" {
		t.Fatalf("before: %s", got)
	}
	cutoff := time.Now().Add(-time.Hour)
	if n, err := snapshot.PruneFactChanges(context.Background(), pool, cutoff, 3); err != nil || n != 3 {
		t.Fatalf("first batch pruned %d revisions (%v), want 3", n, err)
	}
	if got := revs(); got != "4x3 5x3" {
		t.Fatalf("after one batch of three: %s, want revisions 4 and 5 whole", got)
	}
	if n, err := snapshot.PruneFactChanges(context.Background(), pool, cutoff, 3); err != nil || n != 1 {
		t.Fatalf("second batch pruned %d revisions (%v), want 1", n, err)
	}
	if n, err := snapshot.PruneFactChanges(context.Background(), pool, cutoff, 3); err != nil || n != 0 {
		t.Fatalf("third batch pruned %d revisions (%v), want 0 (revision 5 is recent)", n, err)
	}
	if got := revs(); got != "5x3" {
		t.Fatalf("after: %s, want revision 5 whole", got)
	}
}
