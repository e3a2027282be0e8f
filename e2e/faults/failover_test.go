package faults

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc/codes"

	"github.com/clawguard/clawguard/migrations/pgtest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// scrape is one server's /metrics (or /readyz?verbose) body.
func scrape(t *testing.T, addr, path string) string {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	res, err := c.Get("http://" + addr + path)
	if err != nil {
		return ""
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

// replicationReads waits until every server's gauges read mode and n
// synchronous standbys.
func (s *system) replicationReads(mode string, n int) {
	s.t.Helper()
	want := []string{fmt.Sprintf(`clawguard_database_replication{mode=%q} 1`, mode), fmt.Sprintf("clawguard_database_synchronous_standbys %d", n)}
	waitFor(s.t, 45*time.Second, fmt.Sprintf("every server's gauges reading %s with %d synchronous standby(s)", mode, n), func() (bool, string) {
		for _, addr := range s.metrics {
			body := scrape(s.t, addr, "/metrics")
			for _, w := range want {
				if !strings.Contains(body, w) {
					return false, addr + " lacks " + w
				}
			}
		}
		return true, ""
	})
}

// Issue 29 (11): the Postgres primary killed under load and its standby
// promoted. With a synchronous standby nothing the approver was told
// succeeded may come back pending, no approved action may be lost or
// applied twice, and the servers, reconnecting through a DSN naming both
// hosts (target_session_attrs=read-write), say on their gauges what the
// database is before (asynchronous, then synchronous) and after (a single
// node) the failover.
func TestPrimaryKilledAndItsSynchronousStandbyPromoted(t *testing.T) {
	var standby *pgtest.Cluster
	s := newSystemWith(t, systemOptions{pg: durable, metrics: true, beforeServers: func(s *system) {
		t := s.t
		// The server's role may read pg_stat_replication's sync state.
		if _, err := s.admin.Exec(ctxT(t), `GRANT pg_monitor TO clawguard`); err != nil {
			t.Fatal(err)
		}
		dir, err := os.MkdirTemp("", "cgf-standby-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if standby, err = pgtest.StartStandby(ctxT(t), s.pg, dir, "standby1", durable); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = standby.Stop() })
		s.dbURL = fmt.Sprintf("postgres://clawguard@127.0.0.1:%d,127.0.0.1:%d/clawguard?sslmode=disable&target_session_attrs=read-write",
			s.pg.Port, standby.Port)
	}})
	// Streaming, not yet synchronous: the servers say so.
	s.replicationReads("asynchronous", 0)
	if body := scrape(t, s.metrics[0], "/readyz?verbose"); !strings.Contains(body, "none synchronous") {
		t.Fatalf("/readyz?verbose with an asynchronous standby:\n%s", body)
	}
	for _, q := range []string{`ALTER SYSTEM SET synchronous_standby_names = 'standby1'`, `SELECT pg_reload_conf()`} {
		if _, err := s.admin.Exec(ctxT(t), q); err != nil {
			t.Fatal(err)
		}
	}
	s.replicationReads("synchronous", 1)

	x := newA2A(t, s, true, true)
	x.startRunners()
	const n = 150
	ids := x.holds(t, "failover", n)
	token := strings.TrimSpace(readFile(t, s.tokenFile))
	clients := []guardv1.ApprovalsClient{guardv1.NewApprovalsClient(s.op), guardv1.NewApprovalsClient(dial(t, s.addrs[1], token))}
	c := newClicks()
	var wg sync.WaitGroup
	ctx := ctxT(t)
	third := make(chan struct{})
	go func() {
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for i, id := range ids {
			if i == n/3 {
				close(third)
			}
			<-tick.C
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.approveRetrying(ctx, clients[i%2], id, "telegram:dana")
			}()
		}
	}()
	<-third
	// The primary dies (as a crash: no shutdown, no last WAL sent), and the
	// standby is promoted a moment later.
	if err := s.pg.StopMode("immediate"); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	time.Sleep(2 * time.Second) // failure detection's delay (a fault's timing, not a wait for a condition)
	if err := standby.Promote(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	t.Logf("primary killed; standby promoted %.1fs later", time.Since(killed).Seconds())
	newPrimary, err := pgxpool.New(ctxT(t), fmt.Sprintf("postgres://postgres@127.0.0.1:%d/clawguard?sslmode=disable", standby.Port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(newPrimary.Close)
	s.admin = newPrimary

	waitFor(t, 2*time.Minute, "every click answered", func() (bool, string) {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.told) == n, fmt.Sprintf("%d of %d answered", len(c.told), n)
	})
	wg.Wait()
	t.Logf("clicks: %s", c)
	told := c.approvedOK()
	var pending []string
	rows, err := s.admin.Query(ctxT(t), `SELECT id FROM holds WHERE id = ANY($1) AND status <> 'approved'`, told)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		pending = append(pending, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(pending) > 0 {
		t.Fatalf("%d approvals the approver was told succeeded are not approved on the new primary: %v", len(pending), pending)
	}
	c.mu.Lock()
	internal := c.answers[codes.Internal]
	c.mu.Unlock()
	if internal != 0 || len(told) != n {
		t.Fatalf("clicks answered Internal: %d; approved after retrying: %d of %d (%s)", internal, len(told), n, c)
	}
	tl := x.settle(t, "primary killed, synchronous standby promoted", told, "failover", killed, 3*time.Minute)
	if tl.lost != 0 {
		t.Fatalf("lost: %s", tl)
	}
	if n := x.resent(t, told); n != 0 {
		t.Fatalf("%d approved holds were applied only when the reconciler replayed them again: their first replay gave up", n)
	}
	// The new primary has no standby: the servers say so.
	s.replicationReads("none", 0)
	oldPrimaryComesBack(t, s, standby)
}

// oldPrimaryComesBack: the old primary, first in the servers' DSN, comes
// back fenced as deploy/README.md says — as a standby of the new primary,
// never read-write — and a replica restarted then takes no harm (issue 45:
// one that picked a returning old primary hung on synchronous replication
// and crash-looped): it serves, its writes land on the new primary, and the
// old node is its synchronous standby.
func oldPrimaryComesBack(t *testing.T, s *system, newPrimary *pgtest.Cluster) {
	if err := s.pg.Rejoin(ctxT(t), newPrimary, "standby1"); err != nil {
		t.Fatal(err)
	}
	// The fence's last step: the new primary names it synchronous.
	for _, q := range []string{`ALTER SYSTEM SET synchronous_standby_names = 'standby1'`, `SELECT pg_reload_conf()`} {
		if _, err := s.admin.Exec(ctxT(t), q); err != nil {
			t.Fatal(err)
		}
	}
	s.replicationReads("synchronous", 1)
	s.servers[0].Stop()
	restarted := time.Now()
	s.restartServer(t, 0)
	t.Logf("FIGURES replica restarted with the old primary back as a standby: SERVING %.1f s after its start", time.Since(restarted).Seconds())
	name := fmt.Sprintf("after-failover-%d", time.Now().UnixNano())
	s.ncl("groups", "create", "--name", name, "-q") // a write through replica 0
	var n int
	if err := s.admin.QueryRow(ctxT(t), `SELECT count(*) FROM agent_groups WHERE name = $1`, name).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the write through the restarted replica on the new primary: %d rows, %v", n, err)
	}
}
