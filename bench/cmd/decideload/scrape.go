package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// scrapeHeap reads go_memstats_heap_inuse_bytes from a metrics endpoint (0 when unavailable).
func scrapeHeap(url string) float64 {
	v, _ := scrapeMetric(url, "go_memstats_heap_inuse_bytes")
	return v
}

// scrapeMetric reads one sample from a metrics endpoint; name is the
// series as exposed (with its labels, if any).
func scrapeMetric(url, name string) (float64, bool) {
	if url == "" {
		return 0, false
	}
	resp, err := http.Get(url)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, err == nil
		}
	}
	return 0, false
}

// awaitSnapshot waits until the server's fact snapshot has applied the
// fixture (its revision metric reaches the database's), so the warm-up
// starts from the steady state instead of the catch-up of a bulk load
// (decisions for sessions the copy does not know yet are made live).
// Without -metrics, or with the snapshot off, it returns at once.
// checkpoint flushes the fixture's writes to disk before the measured load:
// otherwise the checkpoint that writes them (timed, spread over minutes)
// lands in some runs and not others, and its data-file fsyncs stall the
// WAL flushes that durable commits wait for. Every run starts from the
// same clean cluster, whichever system it measures.
func checkpoint(ctx context.Context, dbURL string) error {
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CHECKPOINT`); err != nil {
		// A database user without the right (a superuser or pg_checkpoint
		// member may) still gets its run, said to be without one.
		fmt.Printf("no checkpoint before the load (%v): a checkpoint during the run may stall its commits\n", err)
	}
	return nil
}

func awaitSnapshot(ctx context.Context, c config) error {
	// A server with the snapshot on made its first full load at boot,
	// seconds before the fixture was in; one with it off never does.
	if loads, ok := scrapeMetric(c.metrics, `clawguard_guard_snapshot_refreshes_total{kind="full"}`); !ok || loads == 0 {
		return nil
	}
	conn, err := pgx.Connect(ctx, c.dbURL)
	if err != nil {
		return fmt.Errorf("await snapshot: %w", err)
	}
	defer conn.Close(ctx)
	var want int64
	if err := conn.QueryRow(ctx, `SELECT rev FROM fact_revision`).Scan(&want); err != nil {
		return fmt.Errorf("await snapshot: %w", err)
	}
	start := time.Now()
	for {
		if have, ok := scrapeMetric(c.metrics, "clawguard_guard_snapshot_revision"); ok && int64(have) >= want {
			fmt.Printf("the server's fact snapshot applied the fixture (revision %d) in %s\n", want, time.Since(start).Round(time.Millisecond))
			return nil
		}
		if time.Since(start) > 30*time.Second {
			return fmt.Errorf("await snapshot: the server's copy is not at revision %d after 30s", want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
