package decexport_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/clawguard/clawguard/migrations/pgtest"
	"github.com/clawguard/clawguard/server/internal/config"
	"github.com/clawguard/clawguard/server/internal/decexport"
	"github.com/clawguard/clawguard/server/internal/retention"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// sink is an httptest decision-log receiver that checks each batch's
// signature and token, and can fail or hold requests.
type sink struct {
	t      *testing.T
	secret []byte
	token  string

	mu       sync.Mutex
	ids      []string
	attempts int
	failNext int           // answer 503 to this many requests
	hold     chan struct{} // when set, requests wait for it to close
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.attempts++
	hold, fail := s.hold, s.failNext > 0
	if fail {
		s.failNext--
	}
	s.mu.Unlock()
	if hold != nil {
		<-hold
	}
	if fail {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	m := hmac.New(sha256.New, s.secret)
	m.Write(body)
	if got := r.Header.Get(decexport.SignatureHeader); got != "sha256="+hex.EncodeToString(m.Sum(nil)) {
		s.t.Errorf("batch signature %q does not match its body", got)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer "+s.token {
		s.t.Errorf("Authorization %q, want the bearer token", got)
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		s.t.Errorf("batch is not gzip: %v", err)
		return
	}
	sc := bufio.NewScanner(zr)
	s.mu.Lock()
	defer s.mu.Unlock()
	for sc.Scan() {
		var rec struct {
			Version int    `json:"version"`
			ID      string `json:"id"`
			Effect  string `json:"effect"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil || rec.Version != decexport.Version || rec.Effect == "" {
			s.t.Errorf("bad NDJSON record %q: %v", sc.Text(), err)
		}
		s.ids = append(s.ids, rec.ID)
	}
}

func (s *sink) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ids...)
}

func insertDecisions(t *testing.T, pool *pgxpool.Pool, n int, age string) []string {
	t.Helper()
	var ids []string
	for i := range n {
		id := "exp-" + age + "-" + strconv.Itoa(i)
		if _, err := pool.Exec(context.Background(), `INSERT INTO decisions (id, at, action, actor, actor_kind, effect)
			VALUES ($1, now() - $2::interval + make_interval(secs => $3), 'cli_command', '{}', 'system', 'allow')`, id, age, i); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

func writeFile(t *testing.T, content string) string {
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(content+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestServerShipsDecisionsInOrderThroughFailures: a server configured with
// --decision-export-url ships every settled decision exactly once and in
// order, signed and with its bearer token, retrying a sink that is down.
func TestServerShipsDecisionsInOrderThroughFailures(t *testing.T) {
	sk := &sink{t: t, secret: []byte("s3cret"), token: "tok", failNext: 2}
	hook := httptest.NewServer(sk)
	defer hook.Close()
	first := testserver.Start(t)
	want := insertDecisions(t, first.Pool, 25, "10 minutes")
	insertDecisions(t, first.Pool, 1, "0 seconds") // not settled: stays until it is
	secret, token := writeFile(t, "s3cret"), writeFile(t, "tok")
	shipper := testserver.StartOn(t, first.URL, func(c *config.Config) {
		c.DecisionExportURL, c.DecisionExportSecretFile, c.DecisionExportTokenFile = hook.URL, secret, token
	})
	testserver.Eventually(t, 20*time.Second, "the export to ship the settled decisions", func() bool {
		return len(sk.got()) >= len(want)
	})
	got := sk.got()
	if len(got) != len(want) {
		t.Fatalf("shipped %d decisions, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("shipped[%d] = %s, want %s (in at order, once each)", i, got[i], want[i])
		}
	}
	sk.mu.Lock()
	attempts := sk.attempts
	sk.mu.Unlock()
	if attempts < 3 {
		t.Fatalf("%d posts, want the two failed ones retried", attempts)
	}
	// Issue 33: failures and lag show as metrics, not only as log lines.
	m := shipper.Deps().Metrics
	testserver.Eventually(t, 5*time.Second, "the shipped batch counted", func() bool {
		return testutil.ToFloat64(m.ExportDecisionsTotal) == float64(len(want))
	})
	if failed := testutil.ToFloat64(m.ExportBatchesTotal.WithLabelValues("failed")); failed != 2 {
		t.Errorf("failed batches = %v, want the sink's 2 refusals", failed)
	}
	if shipped := testutil.ToFloat64(m.ExportBatchesTotal.WithLabelValues("shipped")); shipped < 1 {
		t.Errorf("shipped batches = %v", shipped)
	}
	// Caught up: the one unsettled decision is not due, so nothing waits.
	testserver.Eventually(t, 5*time.Second, "the lag to fall to zero once caught up", func() bool {
		return testutil.ToFloat64(m.ExportLagSeconds) == 0
	})
}

// TestOneShipperAtATimeAndRetentionWaits: while one replica's batch is in
// flight another ships nothing (no duplicate posts), and retention never
// drops a decision that is past retention but not yet exported.
func TestOneShipperAtATimeAndRetentionWaits(t *testing.T) {
	ctx := context.Background()
	sk := &sink{t: t, secret: []byte("k"), token: "b", hold: make(chan struct{})}
	hook := httptest.NewServer(sk)
	defer hook.Close()
	srv := testserver.Start(t, func(c *config.Config) { c.DecisionRetention = 0 })
	old := insertDecisions(t, srv.Pool, 3, "40 days") // default partition, past retention
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ship := func() *decexport.Shipper {
		return &decexport.Shipper{Pool: srv.Pool, Log: log, URL: hook.URL, Secret: []byte("k"), Token: "b"}
	}
	p := &retention.Pruner{DB: srv.Pool, Log: log, DecisionRetention: 30 * 24 * time.Hour, CitationWindow: time.Minute,
		Exported: func(ctx context.Context) (time.Time, error) { return decexport.Watermark(ctx, srv.Pool) }}
	if err := p.PruneOnce(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := srv.Pool.QueryRow(ctx, `SELECT count(*) FROM decisions WHERE id LIKE 'exp-40 days-%'`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("%d (%v) unexported decisions left, want all 3 kept", n, err)
	}

	done := make(chan error, 1)
	go func() { _, err := ship().ShipOnce(ctx); done <- err }()
	testserver.Eventually(t, 10*time.Second, "the first shipper's post", func() bool {
		sk.mu.Lock()
		defer sk.mu.Unlock()
		return sk.attempts == 1
	})
	if n, err := ship().ShipOnce(ctx); err != nil || n != 0 {
		t.Fatalf("a second replica shipped %d (%v) while a batch was in flight, want 0", n, err)
	}
	close(sk.hold)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := sk.got(); len(got) != len(old) {
		t.Fatalf("shipped %v, want %v", got, old)
	}
	if n, err := ship().ShipOnce(ctx); err != nil || n != 0 {
		t.Fatalf("shipped %d (%v) again after the watermark, want 0", n, err)
	}
	if err := p.PruneOnce(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	// Everything strictly before the watermark goes; the row at it (the last
	// shipped) waits for a later one, as a row with the same at may not be.
	if err := srv.Pool.QueryRow(ctx, `SELECT count(*) FROM decisions WHERE id LIKE 'exp-40 days-%' AND id <> $1`, old[2]).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d (%v) exported decisions past retention left, want 0", n, err)
	}
}

// The lag a replica reports is the age of the oldest settled decision not
// yet shipped: it stays while the sink refuses, and falls to zero once the
// batch lands and nothing else is due.
func TestLagIsTheOldestDecisionNotYetShipped(t *testing.T) {
	sk := &sink{t: t, secret: []byte("k"), token: "b", failNext: 1}
	hook := httptest.NewServer(sk)
	defer hook.Close()
	srv := testserver.Start(t)
	insertDecisions(t, srv.Pool, 3, "10 minutes")
	type attempt struct {
		lag     time.Duration
		shipped int
		err     error
	}
	var seen []attempt
	sh := &decexport.Shipper{Pool: srv.Pool, Log: slog.Default(), URL: hook.URL, Secret: []byte("k"), Token: "b",
		Observe: func(lag time.Duration, shipped int, err error) { seen = append(seen, attempt{lag, shipped, err}) }}
	ctx := context.Background()
	if _, err := sh.ShipOnce(ctx); err == nil {
		t.Fatal("the refused batch was not an error")
	}
	if _, err := sh.ShipOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 {
		t.Fatalf("observed %d attempts, want 2", len(seen))
	}
	if a := seen[0]; a.err == nil || a.shipped != 0 || a.lag < 9*time.Minute || a.lag > 11*time.Minute {
		t.Errorf("refused attempt: %+v, want the oldest decision's ten minutes", a)
	}
	if a := seen[1]; a.err != nil || a.shipped != 3 || a.lag != 0 {
		t.Errorf("shipped attempt: %+v, want 3 shipped and no lag left", a)
	}
}
