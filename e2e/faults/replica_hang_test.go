package faults

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Issue 45: a replica that hangs — its link blackholed (no FIN, no RST) or
// its process SIGSTOPped — costs no agent anything while the other replica
// is healthy, and a replica that stops moves its runners at once.

// fleet is three runners, each hosting an agent of its own group, dialling
// both replicas by a --server list (through proxies the test can cut, or
// directly).
type fleet struct {
	s        *system
	runners  []*runner
	sessions []string
	pids     []int
	ready    []string // each runner's /readyz address
	replicas []string // the addresses the runners dial, by replica
}

func newFleet(t *testing.T, s *system, replicas []string) *fleet {
	f := &fleet{s: s, replicas: replicas}
	for i := range 3 {
		g := s.ncl("groups", "create", "--name", fmt.Sprintf("hang-%d", i), "--cli-scope", "group", "-q")
		r := s.newRunner(fmt.Sprintf("runner-%d", i), fmt.Sprintf("h%d", i), g)
		r.addr = strings.Join(replicas, ",")
		ready := loopback(t)
		r.extra = []string{"--metrics-listen", ready}
		r.start()
		f.runners, f.ready = append(f.runners, r), append(f.ready, ready)
	}
	for i, r := range f.runners {
		sess := s.session(r.groups[0], r.id)
		f.sessions = append(f.sessions, sess)
		f.pids = append(f.pids, agentPid(t, r, sess))
		waitFor(t, 30*time.Second, r.id+" ready", func() (bool, string) {
			c, body := readyz(f.ready[i])
			return c == http.StatusOK, body
		})
	}
	return f
}

func readyz(addr string) (int, string) {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 512)
	n, _ := resp.Body.Read(buf)
	b.Write(buf[:n])
	return resp.StatusCode, b.String()
}

// connected is each time the runner said its Connect stream came up, and
// on which replica.
type connected struct {
	at      time.Time
	replica string
}

func (r *runner) connections() []connected {
	var out []connected
	for _, line := range strings.Split(r.p.Tail(100000), "\n") {
		var rec struct {
			Time    time.Time `json:"time"`
			Msg     string    `json:"msg"`
			Replica string    `json:"replica"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "connected to the server" {
			out = append(out, connected{rec.Time, rec.Replica})
		}
	}
	return out
}

// on is the replica (index into f.replicas) r's stream is on now, -1 if none.
func (f *fleet) on(r *runner) int {
	cs := r.connections()
	if len(cs) == 0 {
		return -1
	}
	for i, a := range f.replicas {
		if cs[len(cs)-1].replica == a {
			return i
		}
	}
	return -1
}

// busiest is the replica most runners are on (two of three at least).
func (f *fleet) busiest(t *testing.T) (int, []*runner) {
	by := map[int][]*runner{}
	for _, r := range f.runners {
		by[f.on(r)] = append(by[f.on(r)], r)
	}
	if len(by[0]) >= len(by[1]) {
		return 0, by[0]
	}
	return 1, by[1]
}

// movedAt waits until r came up on replica after since; it returns when.
func (f *fleet) movedAt(t *testing.T, r *runner, replica int, since time.Time, timeout time.Duration) time.Time {
	var at time.Time
	waitFor(t, timeout, r.id+" on replica "+fmt.Sprint(replica), func() (bool, string) {
		for _, c := range r.connections() {
			if c.replica == f.replicas[replica] && c.at.After(since) {
				at = c.at
				return true, ""
			}
		}
		return false, fmt.Sprint(r.connections())
	})
	return at
}

// readyWatch polls every runner's /readyz every 50 ms until stopped.
type readyWatch struct {
	mu       sync.Mutex
	notReady map[string][]string
	polls    int
	stop     chan struct{}
	done     chan struct{}
}

func (f *fleet) watchReady() *readyWatch {
	w := &readyWatch{notReady: map[string][]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
			for i, r := range f.runners {
				c, body := readyz(f.ready[i])
				w.mu.Lock()
				w.polls++
				if c != http.StatusOK {
					w.notReady[r.id] = append(w.notReady[r.id], fmt.Sprintf("%d %s", c, strings.TrimSpace(body)))
				}
				w.mu.Unlock()
			}
		}
	}()
	return w
}

func (w *readyWatch) end() (polls int, notReady map[string][]string) {
	close(w.stop)
	<-w.done
	return w.polls, w.notReady
}

// fencedNone fails if any runner fenced itself or any agent stopped.
func (f *fleet) fencedNone(t *testing.T) {
	t.Helper()
	for i, r := range f.runners {
		if strings.Contains(r.p.Tail(100000), "lease not renewed in time") {
			t.Fatalf("%s fenced its agents", r.id)
		}
		if !alive(f.pids[i]) || countEvents(r, f.sessions[i], "start") != 1 {
			t.Fatalf("%s's agent (pid %d) stopped or restarted: alive %v, starts %d", r.id, f.pids[i], alive(f.pids[i]),
				countEvents(r, f.sessions[i], "start"))
		}
	}
}

func TestAReplicaThatHangsCostsNoAgent(t *testing.T) {
	for _, fault := range []string{"link blackholed", "replica SIGSTOPped"} {
		t.Run(strings.ReplaceAll(fault, " ", "_"), func(t *testing.T) {
			// The default lease (15 s): the fence would come 10 s after the
			// last renewal before the fault.
			s := newSystem(t, "--lease-ttl", "15s")
			replicas := append([]string{}, s.addrs...)
			var links []*blackhole
			if fault == "link blackholed" {
				for i := range s.addrs {
					links = append(links, newBlackhole(t, s.addrs[i]))
					replicas[i] = links[i].addr()
				}
			}
			f := newFleet(t, s, replicas)
			victim, on := f.busiest(t)
			w := f.watchReady()
			cut := time.Now()
			if links != nil {
				links[victim].cut()
				t.Cleanup(links[victim].heal)
			} else {
				if err := syscall.Kill(s.servers[victim].Pid(), syscall.SIGSTOP); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = syscall.Kill(s.servers[victim].Pid(), syscall.SIGCONT) })
			}
			var worst time.Duration
			for _, r := range on {
				at := f.movedAt(t, r, 1-victim, cut, 30*time.Second)
				worst = max(worst, at.Sub(cut))
			}
			// Past the moment the fence would have come without a move.
			waitFor(t, 20*time.Second, "the fence point passed with no fence", func() (bool, string) {
				f.fencedNone(t)
				return time.Since(cut) > 11*time.Second, "waiting"
			})
			polls, notReady := w.end()
			t.Logf("FIGURES fault=%q runners_on_victim=%d worst_move_seconds=%.2f agents_fenced=0 readyz_polls=%d readyz_not_ready=%v",
				fault, len(on), worst.Seconds(), polls, notReady)
			if worst > 5*time.Second {
				t.Fatalf("the runners took %s to reach the healthy replica, want at most 5 s", worst)
			}
		})
	}
}

func TestAStoppingReplicaMovesItsRunnersAtOnce(t *testing.T) {
	s := newSystem(t, "--lease-ttl", "15s")
	f := newFleet(t, s, append([]string{}, s.addrs...))
	victim, on := f.busiest(t)
	w := f.watchReady()
	stop := time.Now()
	stopped := make(chan time.Duration, 1)
	go func() { s.servers[victim].Stop(); stopped <- time.Since(stop) }()
	var worst time.Duration
	for _, r := range on {
		worst = max(worst, f.movedAt(t, r, 1-victim, stop, 30*time.Second).Sub(stop))
	}
	took := <-stopped
	// Readiness watched a while after the move too (a quick move is no 503).
	waitFor(t, 10*time.Second, "readiness watched past the move", func() (bool, string) {
		return time.Since(stop) > 4*time.Second, "waiting"
	})
	polls, notReady := w.end()
	f.fencedNone(t)
	t.Logf("FIGURES fault=\"replica stopped (SIGTERM)\" runners_on_victim=%d worst_move_seconds=%.3f replica_stop_seconds=%.3f readyz_polls=%d readyz_not_ready=%v",
		len(on), worst.Seconds(), took.Seconds(), polls, notReady)
	if worst > time.Second {
		t.Fatalf("the runners took %s to reach the other replica, want under a second", worst)
	}
	if took > 5*time.Second {
		t.Fatalf("the replica took %s to stop, want it not to wait out the runners' streams", took)
	}
	if len(notReady) > 0 {
		t.Fatalf("runners said not ready during the move: %v", notReady)
	}
}

// restartServer starts replica i again on its address (the runners' list
// names it), after it was stopped.
func (s *system) restartServer(t *testing.T, i int) {
	addr := s.addrs[i]
	args := append([]string{bin(t, "clawguard-server"), "serve", "--database-url", s.dbURL, "--auto-migrate",
		"--listen", addr, "--metrics-listen", "", "--operator-token-file", s.tokenFile}, s.flags...)
	p := start(t, fmt.Sprintf("server-%d-again", i), args...)
	waitServing(t, p, addr, nil)
	s.servers[i] = p
}

// Runners spread over the replicas again after a restart: a connection
// older than --connection-max-age is sent GOAWAY, the runner moves its
// streams to a new connection on a random replica.
func TestRunnersSpreadOverTheReplicasAgainAfterARestart(t *testing.T) {
	s := newSystem(t, "--lease-ttl", "15s", "--connection-max-age", "3s")
	f := newFleet(t, s, append([]string{}, s.addrs...))
	victim, _ := f.busiest(t)
	s.servers[victim].Stop()
	for _, r := range f.runners {
		waitFor(t, 15*time.Second, r.id+" on the other replica", func() (bool, string) {
			return f.on(r) == 1-victim, fmt.Sprint(r.connections())
		})
	}
	s.restartServer(t, victim)
	back := time.Now()
	waitFor(t, 60*time.Second, "runners on both replicas again", func() (bool, string) {
		n := 0
		for _, r := range f.runners {
			if f.on(r) == victim {
				n++
			}
		}
		return n > 0 && n < len(f.runners), fmt.Sprintf("%d of %d on the restarted replica", n, len(f.runners))
	})
	t.Logf("FIGURES runners spread over both replicas %.1f s after the restart (connection max age 3 s)", time.Since(back).Seconds())
	f.fencedNone(t)
}
