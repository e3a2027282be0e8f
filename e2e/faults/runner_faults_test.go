package faults

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Issue 29, item 8: ten messages delivered to a busy agent — its process
// stopped (SIGSTOP), not exited, its inbox stream open — and the runner
// SIGKILLed and restarted with the same id: the agent received 0 of 10 (the
// inbox marked an item taken once written to the agent's stream). Now an
// item stays until the agent acknowledges it, so the restarted runner's
// fresh agent gets all ten, once.
func TestMessagesToABusyAgentSurviveARunnerRestart(t *testing.T) {
	s := newSystem(t)
	x := newA2A(t, s, true, true)
	x.startRunners()
	// One message first: B's agent is up and reading its inbox.
	warm := x.holds(t, "warm", 1)
	x.approve(t, warm)
	x.settle(t, "warm-up", warm, "warm", time.Now(), 90*time.Second)
	pid := agentPid(t, x.recv, x.sessB)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	const n = 10
	ids := x.holds(t, "busy", n)
	x.approve(t, ids)
	waitFor(t, 90*time.Second, "the ten messages acknowledged by the receiving runner (on its disk)", func() (bool, string) {
		var acked int
		_ = s.admin.QueryRow(ctxT(t), `SELECT count(*) FROM runner_pushes WHERE kind = 'deliver' AND session_id = $1 AND acked_at IS NOT NULL`, x.sessB).Scan(&acked)
		return acked == n+1, fmt.Sprintf("%d of %d acked", acked, n+1)
	})
	if got := x.count(t, ids, "busy").received; got != 0 {
		t.Fatalf("the stopped agent recorded %d messages", got)
	}
	x.recv.p.Kill()
	waitFor(t, 10*time.Second, "the stopped agent gone with its runner", func() (bool, string) {
		return !alive(pid), fmt.Sprintf("pid %d alive", pid)
	})
	restarted := time.Now()
	x.recv.start()
	x.settle(t, "10 messages to a SIGSTOPped agent, runner SIGKILLed and restarted", ids, "busy", restarted, 90*time.Second)
}

// Issue 29, item 8, the other half: a busy agent that never comes back —
// stopped, its runner running on — is restarted once it has acknowledged
// nothing for the ack deadline, and the fresh agent gets every message,
// once (what the stopped one handled as it died is recognised by item id).
func TestAStoppedAgentIsRestartedAndGetsItsMessages(t *testing.T) {
	s := newSystem(t)
	x := newA2A(t, s, true, true)
	x.recv.extra = []string{"--inbox-ack-deadline", "3s"}
	x.startRunners()
	warm := x.holds(t, "warm", 1)
	x.approve(t, warm)
	x.settle(t, "warm-up", warm, "warm", time.Now(), 90*time.Second)
	pid := agentPid(t, x.recv, x.sessB)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	const n = 10
	ids := x.holds(t, "stalled", n)
	x.approve(t, ids)
	approved := time.Now()
	tl := x.settle(t, "10 messages to a SIGSTOPped agent, restarted by the ack deadline (3 s)", ids, "stalled", approved, 90*time.Second)
	if alive(pid) {
		t.Fatalf("the stopped agent (pid %d) still lives beside its replacement", pid)
	}
	if !strings.Contains(x.recv.p.Tail(400), "agent holds inbox items without acknowledging them; restarting it") {
		t.Fatalf("the runner never said it restarted the stalled agent (%s)", tl)
	}
}

// Issue 29, item 10: a runner cut off from the servers — its link
// blackholed, or the replica holding its streams SIGSTOPped — never
// noticed, and once the server gave its session to another runner the
// session had two live agents for ~13 s. The runner now stops its agents
// before its lease can expire; the new host's agent starts only after.
// Asserted from the agents' own event logs against the lease's expiry as
// the database recorded it.
func TestAPartitionedRunnerStopsItsAgentsBeforeItsLeaseCanExpire(t *testing.T) {
	for _, fault := range []string{"link blackholed", "replica SIGSTOPped"} {
		t.Run(strings.ReplaceAll(fault, " ", "_"), func(t *testing.T) {
			s := newSystem(t)
			// A stopped replica's open transactions must not hold the
			// survivor's lease sweep up (the setting an operator would use).
			for _, q := range []string{`ALTER SYSTEM SET idle_in_transaction_session_timeout = '2s'`, `SELECT pg_reload_conf()`} {
				if _, err := s.admin.Exec(ctxT(t), q); err != nil {
					t.Fatal(err)
				}
			}
			g := s.ncl("groups", "create", "--name", "moving", "--cli-scope", "group", "-q") // unpinned: it may move
			a := s.newRunner("runner-1", "h1", g)
			var link *blackhole
			if fault == "link blackholed" {
				link = newBlackhole(t, s.addrs[0])
				a.addr = link.addr()
			}
			b := s.newRunner("runner-2", "h2")
			b.server = 1
			a.start()
			sess := s.session(g, a.id)
			pidA := agentPid(t, a, sess)
			b.start()
			waitFor(t, 60*time.Second, "the spare runner registered", func() (bool, string) {
				var live bool
				_ = s.admin.QueryRow(ctxT(t), `SELECT lease_expires_at > now() FROM runners WHERE id = $1`, b.id).Scan(&live)
				return live, fmt.Sprint("live ", live)
			})

			cut := time.Now()
			if link != nil {
				link.cut()
			} else if err := syscall.Kill(s.servers[0].Pid(), syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			heal := func() {
				if link != nil {
					link.heal()
				} else {
					_ = syscall.Kill(s.servers[0].Pid(), syscall.SIGCONT)
				}
			}
			t.Cleanup(heal)
			s.session(g, b.id) // the server gave the session to the spare runner
			var leaseEnd time.Time
			if err := s.admin.QueryRow(ctxT(t), `SELECT lease_expires_at FROM runners WHERE id = $1`, a.id).Scan(&leaseEnd); err != nil {
				t.Fatal(err)
			}
			var startB time.Time
			waitFor(t, 60*time.Second, "the new host's agent started", func() (bool, string) {
				startB = eventAt(b, sess, "start")
				return !startB.IsZero(), "no start event"
			})
			// The agent's own word, else the runtime's (an agent SIGKILLed
			// at the deadline records nothing).
			stopA := eventAt(a, sess, "stop")
			if stopA.IsZero() {
				stopA = exitedAt(a, sess)
			}
			if stopA.IsZero() || alive(pidA) {
				t.Fatalf("the cut-off runner's agent (pid %d, alive %v) never stopped, and the new host's started at %s: two live agents",
					pidA, alive(pidA), startB.Format(time.RFC3339Nano))
			}
			if !stopA.Before(leaseEnd) || !stopA.Before(startB) {
				t.Fatalf("the cut-off runner's agent stopped at %s; its lease ended at %s, the new host's agent started at %s",
					stopA.Format(time.RFC3339Nano), leaseEnd.Format(time.RFC3339Nano), startB.Format(time.RFC3339Nano))
			}
			toldMoved(t, sess, a, b)
			t.Logf("FIGURES fault=%q cut_to_stop_seconds=%.1f stop_before_lease_end_seconds=%.1f stop_to_new_start_seconds=%.1f",
				"runner "+fault+" past its 3 s lease", stopA.Sub(cut).Seconds(), leaseEnd.Sub(stopA).Seconds(), startB.Sub(stopA).Seconds())

			heal()
			healed := time.Now()
			waitFor(t, 60*time.Second, "the healed runner to release the session that moved", func() (bool, string) {
				return strings.Contains(a.p.Tail(400), "session no longer hosted here; releasing it"), "not released yet"
			})
			t.Logf("the healed runner released the moved session %.1f s after the heal (%.1f s after the cut)",
				time.Since(healed).Seconds(), time.Since(cut).Seconds())
			if !strings.Contains(a.p.Tail(400), "lease not renewed in time") {
				t.Fatal("the cut-off runner never said it fenced itself")
			}
			if n := countEvents(a, sess, "start"); n != 1 {
				t.Fatalf("the cut-off runner started the moved session's agent %d times, want once (before the cut)", n)
			}
		})
	}
}

// Issue 29, item 11: the primary failed over to a standby that lagged, the
// approvals came back pending, and approving them again delivered the
// messages a second time (the runners had delivered them already). Here the
// database forgets for real (its data directory put back as it was before
// the approvals) and the target runner restarts in between: each message
// reaches the target agent once, and the sender's agent hears "approved"
// once per hold.
func TestAHoldApprovedAgainAfterTheDatabaseForgotIsDeliveredOnce(t *testing.T) {
	s := newSystem(t)
	x := newA2A(t, s, true, true)
	x.startRunners()
	const n = 3
	ids := x.holds(t, "forgot", n)
	snap := s.snapshotDB(t)
	x.approve(t, ids)
	x.settle(t, "first approval", ids, "forgot", time.Now(), 90*time.Second)

	x.recv.p.Kill() // the target's runner restarts too: its record is on disk
	x.recv.start()
	s.restoreDB(t, snap)
	var pending int
	if err := s.admin.QueryRow(ctxT(t), `SELECT count(*) FROM holds WHERE id = ANY($1) AND status = 'pending'`, ids).Scan(&pending); err != nil || pending != n {
		t.Fatalf("%d of %d holds pending after the database forgot (%v)", pending, n, err)
	}
	again := time.Now()
	x.approveOnceServing(t, ids)
	x.settle(t, "holds approved again after the database forgot them", ids, "forgot", again, 2*time.Minute)
	// A later message behind them in B's inbox: once it is in, whatever the
	// re-approval delivered is in too.
	marker := x.holds(t, "marker", 1)
	x.approve(t, marker)
	x.settle(t, "marker", marker, "marker", time.Now(), 90*time.Second)
	if tl := x.count(t, ids, "forgot"); tl.received != n || tl.receivedTwice != 0 {
		t.Fatalf("after the marker: %s", tl)
	}
	told := map[string]int{}
	for _, ev := range x.sender.events(x.sessA) {
		if ev["type"] == "notice" && ev["kind"] == "APPROVED" {
			told[fmt.Sprint(ev["hold_id"])]++
		}
	}
	for _, id := range ids {
		if told[id] != 1 {
			t.Fatalf("the sender's agent heard hold %s approved %d times, want once (all: %v)", id, told[id], told)
		}
	}
}

// approveOnceServing approves the holds as Dana, each tried again while the
// replicas find their way back to the restarted database (a click answered
// with an error changed nothing).
func (x *a2a) approveOnceServing(t *testing.T, ids []string) {
	t.Helper()
	c := guardv1.NewApprovalsClient(x.s.op)
	for _, id := range ids {
		waitFor(t, 60*time.Second, "hold "+id+" approved again", func() (bool, string) {
			_, err := c.Resolve(ctxT(t), &guardv1.ResolveRequest{Id: id, Outcome: guardv1.Outcome_OUTCOME_APPROVE, AsUser: "telegram:dana"})
			if err == nil {
				return true, ""
			}
			var st string
			_ = x.s.admin.QueryRow(ctxT(t), `SELECT status FROM holds WHERE id = $1`, id).Scan(&st)
			return st == "approved", err.Error()
		})
	}
}

// snapshotDB copies the cluster's data directory (Postgres stopped for the
// copy): what a standby that stopped replaying here would hold.
func (s *system) snapshotDB(t *testing.T) string {
	t.Helper()
	snap := filepath.Join(s.pg.Dir, "data.snapshot")
	if err := s.pg.Stop(); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", filepath.Join(s.pg.Dir, "data"), snap).CombinedOutput(); err != nil {
		t.Fatalf("snapshot: %v\n%s", err, out)
	}
	if err := s.pg.Start(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	return snap
}

// restoreDB puts the snapshot back: the database forgets everything since.
func (s *system) restoreDB(t *testing.T, snap string) {
	t.Helper()
	if err := s.pg.Stop(); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(s.pg.Dir, "data")
	if err := os.RemoveAll(data); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", snap, data).CombinedOutput(); err != nil {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	if err := s.pg.Start(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	s.admin.Reset()
}

// agentPid waits for the session's demo agent on r to start and returns its pid.
// toldMoved waits for the agent of session on runner to, moved there from
// runner from, to have read that it moved (issue 45).
func toldMoved(t *testing.T, session string, from, to *runner) {
	waitFor(t, 30*time.Second, "the moved agent told it moved", func() (bool, string) {
		for _, ev := range to.events(session) {
			if ev["type"] == "notice" && strings.Contains(fmt.Sprint(ev["text"]), "moved from runner "+from.id+" to runner "+to.id) {
				return true, ""
			}
		}
		return false, fmt.Sprint(to.events(session))
	})
}

func agentPid(t *testing.T, r *runner, session string) int {
	t.Helper()
	pid := 0
	waitFor(t, 60*time.Second, "the agent of "+session+" on "+r.id, func() (bool, string) {
		for _, ev := range r.events(session) {
			if ev["type"] == "start" {
				if p, ok := ev["pid"].(float64); ok {
					pid = int(p)
				}
			}
		}
		return pid > 0 && alive(pid), fmt.Sprint("pid ", pid)
	})
	return pid
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	if err != nil {
		return !errors.Is(err, syscall.ESRCH)
	}
	// A zombie (exited, not yet reaped by its parent) is not alive.
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if i := strings.LastIndexByte(string(b), ')'); i > 0 && i+2 < len(b) {
		return b[i+2] != 'Z' && b[i+2] != 'X'
	}
	return true
}

// eventAt is when the session's agent on r first recorded an event of that
// type (zero: never).
func eventAt(r *runner, session, typ string) time.Time {
	for _, ev := range r.events(session) {
		if ev["type"] == typ {
			at, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(ev["at"]))
			return at
		}
	}
	return time.Time{}
}

// exitedAt is when r's process runtime saw the session's agent exit (zero:
// not in its log).
func exitedAt(r *runner, session string) time.Time {
	for _, line := range strings.Split(r.p.Tail(2000), "\n") {
		var rec struct {
			Time    time.Time `json:"time"`
			Msg     string    `json:"msg"`
			Session string    `json:"session"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "agent process exited" && rec.Session == session {
			return rec.Time
		}
	}
	return time.Time{}
}

func countEvents(r *runner, session, typ string) int {
	n := 0
	for _, ev := range r.events(session) {
		if ev["type"] == typ {
			n++
		}
	}
	return n
}

// blackhole is a TCP proxy the test controls: it forwards to its target
// until cut, then forwards nothing either way — connections stay open, as
// behind a link that drops every packet — until healed.
type blackhole struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	open   chan struct{} // closed while forwarding
	done   chan struct{}
	conns  []net.Conn
}

func newBlackhole(t *testing.T, target string) *blackhole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blackhole{ln: ln, target: target, open: make(chan struct{}), done: make(chan struct{})}
	close(b.open)
	go b.serve()
	t.Cleanup(b.close)
	return b
}

func (b *blackhole) addr() string { return b.ln.Addr().String() }

func (b *blackhole) cut() {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-b.open:
		b.open = make(chan struct{})
	default:
	}
}

func (b *blackhole) heal() {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-b.open:
	default:
		close(b.open)
	}
}

// pass waits while the link is cut.
func (b *blackhole) pass() bool {
	b.mu.Lock()
	open := b.open
	b.mu.Unlock()
	select {
	case <-open:
		return true
	case <-b.done:
		return false
	}
}

func (b *blackhole) serve() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", b.target)
		if err != nil {
			c.Close()
			continue
		}
		b.mu.Lock()
		b.conns = append(b.conns, c, up)
		b.mu.Unlock()
		go b.pipe(up, c)
		go b.pipe(c, up)
	}
}

func (b *blackhole) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !b.pass() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (b *blackhole) close() {
	close(b.done)
	b.ln.Close()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.conns {
		c.Close()
	}
}
