package app_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/clawguard/clawguard/migrations/pgtest"
	"github.com/clawguard/clawguard/server/internal/metrics"
	"github.com/clawguard/clawguard/server/internal/store"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// Issue 29 (13): during a failover both replicas logged "schema not current
// (run clawguard-server migrate)" while the database was merely
// unreachable. A database that cannot be reached says so — in the log and
// in /readyz — and when it answers again the replica says it serves.
func TestAnUnreachableDatabaseIsNotASchemaBehind(t *testing.T) {
	var logs syncBuffer
	srv := testserver.StartLogged(t, &logs)
	base := "http://" + srv.MetricsAddr()
	testserver.Eventually(t, 10*time.Second, "/readyz 200", func() bool {
		code, _ := get(t, base+"/readyz")
		return code == http.StatusOK
	})

	admin, err := pgx.Connect(context.Background(), pgtest.AdminURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	db := pgx.Identifier{strings.TrimPrefix(u.Path, "/")}.Sanitize()
	ctx := context.Background()
	// The database refuses connections and drops the ones it has: what a
	// replica sees while its primary is down or being replaced.
	if _, err := admin.Exec(ctx, `ALTER DATABASE `+db+` ALLOW_CONNECTIONS false`); err != nil {
		t.Fatal(err)
	}
	allow := func() { _, _ = admin.Exec(context.Background(), `ALTER DATABASE `+db+` ALLOW_CONNECTIONS true`) }
	defer allow()
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, strings.Trim(db, `"`)); err != nil {
		t.Fatal(err)
	}
	testserver.Eventually(t, 15*time.Second, "/readyz saying the database is unreachable", func() bool {
		code, body := get(t, base+"/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "database unreachable")
	})
	if len(logs.lines(t, "the database cannot be reached; NOT_SERVING until it answers")) == 0 {
		t.Fatal("no log line says the database cannot be reached")
	}
	if n := len(logs.lines(t, "schema not current (run clawguard-server migrate); NOT_SERVING")); n != 0 {
		t.Fatalf("%d lines call an unreachable database a schema behind", n)
	}

	allow()
	testserver.Eventually(t, 15*time.Second, "/readyz 200 again", func() bool {
		code, _ := get(t, base+"/readyz")
		return code == http.StatusOK
	})
	if len(logs.lines(t, "the database answers and the schema is current; SERVING")) == 0 {
		t.Fatal("no log line says the replica serves again")
	}
}

// Issue 29 (11): the server says what its database is. A single node has
// no standby: /readyz?verbose, the gauges and the log say so (a standby
// streaming synchronously, and an asynchronous one, are the fault suite's
// failover test, on a real standby).
func TestReadinessSaysWhatTheDatabaseIs(t *testing.T) {
	var logs syncBuffer
	srv := testserver.StartLogged(t, &logs)
	base := "http://" + srv.MetricsAddr()
	testserver.Eventually(t, 10*time.Second, "/readyz?verbose naming the replication", func() bool {
		code, body := get(t, base+"/readyz?verbose")
		return code == http.StatusOK && strings.Contains(body, "replication: primary with no standby") && strings.HasSuffix(body, "ok\n")
	})
	if code, body := get(t, base+"/readyz"); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("/readyz: %d %q, want the plain answer without ?verbose", code, body)
	}
	_, scrape := get(t, base+"/metrics")
	for _, want := range []string{
		`clawguard_database_replication{mode="none"} 1`,
		`clawguard_database_replication{mode="synchronous"} 0`,
		"clawguard_database_synchronous_standbys 0",
	} {
		if !strings.Contains(scrape, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if l := logs.lines(t, "database replication: primary with no standby: a failover has nothing to promote; what is acknowledged lives on this server's disk alone"); len(l) != 1 || l[0]["mode"] != "none" {
		t.Fatalf("replication log lines %v, want one saying it is a single node", l)
	}
}

// The gauge's label values are the modes store reports.
func TestReplicationModesAreTheGaugesLabels(t *testing.T) {
	if !slices.Equal(store.ReplicationModes, metrics.ReplicationModes) {
		t.Fatalf("store modes %v, metric labels %v", store.ReplicationModes, metrics.ReplicationModes)
	}
}
