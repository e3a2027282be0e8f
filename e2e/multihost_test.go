package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/clawguard/clawguard/migrations/pgtest"
)

// TestMultiHost runs Clawguard as deployed on several machines, on this one:
//
//   - two hosts are two network namespaces made by the test (newHosts: a veth
//     pair and a /30 each); each runs one clawguard-runner (process runtime,
//     demo agent) for one agent group;
//   - two clawguard-server replicas run in the root namespace, one Postgres
//     behind them; replica 1 listens on host A's link, replica 2 on host B's,
//     both on the same port;
//   - the runners dial "control:<port>", and each host's own /etc/hosts
//     (/etc/netns/<ns>/hosts) lists replica 1 then replica 2 for "control":
//     gRPC's resolver sees two addresses, pick_first takes replica 1 and
//     falls over to replica 2. The runner's --server takes one host:port, so
//     a multi-address name is how it learns of both replicas.
//
// The scenario: the agent on host A sends three messages to the agent on
// host B under a message policy. All are decided HOLD (while the runners
// talk to replica 1); the owner approves the first on replica 2 and it is
// delivered on host B; the owner approves the second on replica 2 and
// replica 1 is SIGKILLed while it is applying that send for runner A (held
// there by a database lock the test owns); both runners reconnect to
// replica 2 and the second message is delivered; the third is approved with
// replica 1 gone and travels through replica 2 alone. No hold, push or
// decision is lost or doubled.
func TestMultiHost(t *testing.T) {
	requireNetns(t)
	ctx := context.Background()
	hosts := newHosts(t, 2)
	hostA, hostB := hosts[0], hosts[1]
	port := freePort(t)
	r1Addr, r2Addr := net.JoinHostPort(hostA.Gateway, port), net.JoinHostPort(hostB.Gateway, port)
	for _, h := range hosts {
		h.SetHosts(t, "control", hostA.Gateway, hostB.Gateway)
	}

	dbURL := pgtest.NewEmptyDB(t)
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "operator.token")
	// A short lease: a runner that failed to reconnect would lose its lease
	// within the test, which the runners check at the end would see.
	// application_name tells the replicas' database sessions apart.
	r1 := startServer(t, "replica-1", withAppName(t, dbURL, "replica-1"), r1Addr, loopback(t), tokenFile, "--lease-ttl", "6s")
	r2 := startServer(t, "replica-2", withAppName(t, dbURL, "replica-2"), r2Addr, loopback(t), tokenFile, "--lease-ttl", "6s")
	n1, n2 := nclFor(t, r1), nclFor(t, r2)

	// Set-up, on replica 1: an owner who approves, two groups, A may message
	// B, and every A→B message is held for the owner.
	const owner = "local:owner"
	n1.must(t, "users", "create", "--id", owner, "--display-name", "Owner")
	n1.must(t, "roles", "grant", "--user", owner, "--role", "owner", "--scope", "global")
	n1.must(t, "user-dms", "set", "--user", owner, "--channel-type", "local", "--address", "console")
	groupA := n1.must(t, "groups", "create", "--name", "on-host-a", "--cli-scope", "group", "-q")
	groupB := n1.must(t, "groups", "create", "--name", "on-host-b", "--cli-scope", "group", "-q")
	n1.must(t, "destinations", "add", "--group", groupA, "--name", "peer", "--target-group", groupB)
	n1.must(t, "policies", "set", "--from", groupA, "--to", groupB, "--approver", owner)

	script, _ := json.Marshal([]map[string]any{
		{"action": "send_message", "request_id": "msg-1", "payload": map[string]any{"to": groupB, "text": "one"}},
		{"action": "send_message", "request_id": "msg-2", "payload": map[string]any{"to": groupB, "text": "two"}},
		{"action": "send_message", "request_id": "msg-3", "payload": map[string]any{"to": groupB, "text": "three"}},
	})
	dataA, dataB := runnerDataDir(t), runnerDataDir(t)
	// Replica 1 first, as "control" lists it (runners pick a random
	// address by default): the scenario kills the replica they are on.
	firstReplica := []string{"--server-pick", "first"}
	metricsA := net.JoinHostPort(hostA.Addr, freePort(t))
	startRunner(t, runnerOpts{id: "runner-a", host: "host-a", server: "control:" + port, tokenFile: runnerToken(t, n1, "runner-a"),
		dataDir: dataA, metrics: metricsA, groups: []string{groupA}, script: string(script), wrap: hostA.Wrap(), extra: firstReplica})
	startRunner(t, runnerOpts{id: "runner-b", host: "host-b", server: "control:" + port, tokenFile: runnerToken(t, n1, "runner-b"),
		dataDir: dataB, metrics: net.JoinHostPort(hostB.Addr, freePort(t)), groups: []string{groupB}, script: "[]", wrap: hostB.Wrap(), extra: firstReplica})

	// Both hosts reach the control plane through replica 1, the first
	// address of "control".
	for _, h := range hosts {
		waitConnectedTo(t, h, port, hostA.Gateway, "replica 1")
	}

	// 1. The decisions and the holds: all three sends are held for the
	//    owner (decided on replica 1), and replica 2 lists them.
	var holds []map[string]any
	waitFor(t, 30*time.Second, "three pending a2a holds listed by replica 2", func() (bool, string) {
		out, errOut, code := n2.run("approvals", "list", "--group", groupA, "--kind", "a2a_message_gate", "-o", "json")
		if code != 0 {
			return false, errOut
		}
		holds = nil
		if err := json.Unmarshal([]byte(out), &holds); err != nil {
			return false, err.Error()
		}
		return len(holds) == 3, out
	})
	holdFor := map[string]string{} // message text → hold id
	for _, h := range holds {
		p, _ := h["payload"].(map[string]any)
		if p["to"] != groupB || h["delivered_to"] != owner {
			t.Errorf("hold %v: want payload.to %s and delivered to %s", h["id"], groupB, owner)
		}
		holdFor[fmt.Sprint(p["text"])] = fmt.Sprint(h["id"])
	}
	if holdFor["one"] == "" || holdFor["two"] == "" || holdFor["three"] == "" {
		t.Fatalf("holds by message text: %v", holdFor)
	}
	for text, id := range holdFor {
		var effect string
		if err := pool.QueryRow(ctx, `SELECT effect FROM decisions WHERE hold_id = $1 AND action = 'a2a.send'
			AND agent_group_id = $2`, id, groupA).Scan(&effect); err != nil || effect != "hold" {
			t.Errorf("decision of message %q (hold %s): effect %q, %v; want one hold decision", text, id, effect, err)
		}
	}
	waitFor(t, 10*time.Second, "agent A told its three sends are held", func() (bool, string) {
		got := eventsWhere(agentEvents(dataA), func(e event) bool { return e.str("type") == "send" && e.str("status") == "HELD" })
		return len(got) == 3, describe(got)
	})

	// 2. Approval on the other replica; delivery on host B.
	n2.must(t, "approvals", "approve", holdFor["one"], "--as", owner)
	waitDelivered(t, dataB, groupA, "one")

	// 3. Kill replica 1 in the middle of delivering the second message: the
	//    owner approves it on replica 2, replica 1 pushes the replay to
	//    runner A, runner A re-decides with the grant and asks replica 1 to
	//    apply the send (ApplyAction: citation and delivery push in one
	//    transaction). The test holds the advisory lock that transaction
	//    needs for group B's sessions, so the call is provably in flight on
	//    replica 1 when replica 1 is SIGKILLed; then the lock is released
	//    and the orphaned transaction rolls back. The message must still
	//    arrive, once.
	lock, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(ctx)
	if _, err := lock.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('clawguard_group_sessions:' || $1))`, groupB); err != nil {
		t.Fatal(err)
	}
	n2.must(t, "approvals", "approve", holdFor["two"], "--as", owner)
	waitFor(t, 20*time.Second, "replica 1 applying message two (blocked on the test's lock)", func() (bool, string) {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'replica-1'
			AND wait_event_type = 'Lock' AND wait_event = 'advisory'`).Scan(&n)
		return err == nil && n == 1, fmt.Sprintf("%d waiting, %v", n, err)
	})
	r1.Kill()
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	for _, h := range hosts {
		waitConnectedTo(t, h, port, hostB.Gateway, "replica 2 (replica 1 is dead)")
	}
	t.Logf("both hosts on replica 2 %s after replica 1 was killed", time.Since(killed).Round(time.Millisecond))
	waitDelivered(t, dataB, groupA, "two")
	t.Logf("message two delivered on host B %s after the kill", time.Since(killed).Round(time.Millisecond))

	// 4. With replica 1 gone for good, the whole path runs on replica 2:
	//    approval, replay push to host A, re-decision, delivery to host B.
	n2.must(t, "approvals", "approve", holdFor["three"], "--as", owner)
	waitDelivered(t, dataB, groupA, "three")

	// Nothing lost, nothing doubled. Each message arrived once on host B.
	msgs := eventsWhere(agentEvents(dataB), func(e event) bool { return e.str("type") == "message" && e.str("from") == groupA })
	var texts []string
	for _, m := range msgs {
		texts = append(texts, m.str("text"))
	}
	slices.Sort(texts)
	if !slices.Equal(texts, []string{"one", "three", "two"}) {
		t.Errorf("host B's agent received %v, want one, two and three exactly once each: %s", texts, describe(msgs))
	}
	// Agent A heard each result.
	waitFor(t, 20*time.Second, "agent A told every send was delivered", func() (bool, string) {
		got := eventsWhere(agentEvents(dataA), func(e event) bool { return e.str("type") == "notice" && e.str("kind") == "RESULT" })
		ids := map[string]bool{}
		for _, e := range got {
			ids[e.str("hold_id")] = true
		}
		return ids[holdFor["one"]] && ids[holdFor["two"]] && ids[holdFor["three"]], describe(got)
	})
	// Holds: both approved by the owner and consumed by exactly one replay.
	for text, id := range holdFor {
		var status, resolver string
		var consumed bool
		if err := pool.QueryRow(ctx, `SELECT status, resolver, consumed_at IS NOT NULL FROM holds WHERE id = $1`, id).
			Scan(&status, &resolver, &consumed); err != nil {
			t.Fatal(err)
		}
		if status != "approved" || !strings.Contains(resolver, owner) || !consumed {
			t.Errorf("hold of %q: status %s, resolver %q, consumed %v; want approved by %s and consumed", text, status, resolver, consumed, owner)
		}
	}
	// Decisions: per message one HOLD and one ALLOW that used its grant.
	rows, err := pool.Query(ctx, `SELECT effect, grant_id, hold_id FROM decisions
		WHERE action = 'a2a.send' AND agent_group_id = $1 AND NOT dry_run ORDER BY at`, groupA)
	if err != nil {
		t.Fatal(err)
	}
	var decisions []string
	for rows.Next() {
		var effect, grant, hold string
		if err := rows.Scan(&effect, &grant, &hold); err != nil {
			t.Fatal(err)
		}
		decisions = append(decisions, effect+" "+grant+hold)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(decisions)
	var want []string
	for _, id := range holdFor {
		want = append(want, "allow "+id, "hold "+id)
	}
	slices.Sort(want)
	t.Logf("a2a.send decisions of group A: %q", decisions)
	if !slices.Equal(decisions, want) {
		t.Errorf("a2a.send decisions of group A: %q, want %q", decisions, want)
	}
	// Pushes: every push to either runner was acknowledged.
	waitFor(t, 20*time.Second, "no unacknowledged push", func() (bool, string) {
		var pending int
		var kinds string
		if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE acked_at IS NULL),
			coalesce(string_agg(kind || ':' || runner_id || ':' || (acked_at IS NOT NULL)::text, ' ' ORDER BY created_at), '')
			FROM runner_pushes`).Scan(&pending, &kinds); err != nil {
			return false, err.Error()
		}
		return pending == 0, kinds
	})
	var delivers int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM runner_pushes WHERE kind = 'deliver' AND runner_id = 'runner-b'`).Scan(&delivers); err != nil {
		t.Fatal(err)
	}
	if delivers != 3 {
		t.Errorf("%d deliver pushes to runner-b, want 3 (one per message)", delivers)
	}
	// Both runners still hold live leases, as replica 2 reports them.
	var runners []map[string]any
	if err := json.Unmarshal([]byte(n2.must(t, "runners", "list", "-o", "json")), &runners); err != nil {
		t.Fatal(err)
	}
	live := map[string]any{}
	for _, r := range runners {
		live[fmt.Sprint(r["id"])] = r["live"]
	}
	if live["runner-a"] != true || live["runner-b"] != true {
		t.Errorf("runners after failover: %v, want runner-a and runner-b live", live)
	}
	// Runner A's own account: it reconnected and is connected.
	body, err := scrape(metricsA)
	if err != nil {
		t.Fatal(err)
	}
	if up, _ := sample(body, "clawguard_runner_stream_connected"); up != "1" {
		t.Errorf("runner A clawguard_runner_stream_connected = %q, want 1", up)
	}
	if n, _ := sample(body, "clawguard_runner_stream_reconnects_total"); n == "" || n == "0" {
		t.Errorf("runner A clawguard_runner_stream_reconnects_total = %q, want > 0 after losing replica 1", n)
	}
	if r2.Exited() {
		t.Errorf("replica 2 exited; it should serve on alone")
	}
}

// withAppName sets the application_name a Postgres URL connects with.
func withAppName(t *testing.T, dbURL, name string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", name)
	u.RawQuery = q.Encode()
	return u.String()
}

// waitConnectedTo waits until host h has a TCP connection to addr:port and
// none to another address on that port.
func waitConnectedTo(t *testing.T, h netHost, port, addr, what string) {
	t.Helper()
	waitFor(t, 30*time.Second, h.NS+" connected to "+what, func() (bool, string) {
		peers, err := h.PeersOn(port)
		if err != nil {
			return false, err.Error()
		}
		return len(peers) > 0 && !slices.ContainsFunc(peers, func(p string) bool { return p != addr }),
			fmt.Sprintf("connections to port %s: %v", port, peers)
	})
}

// waitDelivered waits until the agent under dataDir has received text from group.
func waitDelivered(t *testing.T, dataDir, from, text string) {
	t.Helper()
	waitFor(t, 30*time.Second, fmt.Sprintf("message %q delivered on host B", text), func() (bool, string) {
		evs := agentEvents(dataDir)
		got := eventsWhere(evs, func(e event) bool {
			return e.str("type") == "message" && e.str("from") == from && e.str("text") == text
		})
		return len(got) > 0, describe(evs)
	})
}
