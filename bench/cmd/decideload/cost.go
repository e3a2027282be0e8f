package main

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// clockTicks is USER_HZ, the unit of utime/stime in /proc/<pid>/stat.
const clockTicks = 100

// cost is what a run cost per decision.
type cost struct {
	decisions                int
	serverCPU, pgCPU         float64 // µs of CPU per decision
	generatorCPU             float64 // µs of this process's CPU per decision (it shares the machine)
	walBytes                 float64 // WAL bytes per decision
	serverTicks, pgTicks     int64
	generatorTicks           int64
	walLSN                   string
	started                  time.Time
	serverPID, postmasterPID int
}

// accounting samples the server's and Postgres's CPU (from /proc) and the
// WAL position, so a run reports what one decision costs.
type accounting struct {
	conn                     *pgx.Conn
	serverPID, postmasterPID int
}

func newAccounting(ctx context.Context, dbURL string, serverPID int) (*accounting, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, fmt.Errorf("accounting: %w", err)
	}
	a := &accounting{conn: conn, serverPID: serverPID}
	if a.serverPID == 0 {
		a.serverPID = findProcess("clawguard-serve") // comm is cut at 15 characters
	}
	var backend int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err == nil {
		a.postmasterPID = parentOf(backend)
	}
	return a, nil
}

func (a *accounting) close() { _ = a.conn.Close(context.Background()) }

func (a *accounting) sample(ctx context.Context) cost {
	c := cost{started: time.Now(), serverPID: a.serverPID, postmasterPID: a.postmasterPID, generatorTicks: ticks(os.Getpid())}
	if a.serverPID > 0 {
		c.serverTicks = ticks(a.serverPID)
	}
	if a.postmasterPID > 0 {
		c.pgTicks = treeTicks(a.postmasterPID)
	}
	_ = a.conn.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&c.walLSN)
	return c
}

// since is the cost per decision of n decisions made since before.
func (a *accounting) since(ctx context.Context, before cost, n int) cost {
	now := a.sample(ctx)
	out := cost{decisions: n}
	if n == 0 {
		return out
	}
	perTick := float64(time.Second/clockTicks) / float64(time.Microsecond)
	if before.serverPID > 0 {
		out.serverCPU = float64(now.serverTicks-before.serverTicks) * perTick / float64(n)
	}
	if before.postmasterPID > 0 {
		out.pgCPU = float64(now.pgTicks-before.pgTicks) * perTick / float64(n)
	}
	out.generatorCPU = float64(now.generatorTicks-before.generatorTicks) * perTick / float64(n)
	var wal float64
	if before.walLSN != "" && a.conn.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)`, before.walLSN).Scan(&wal) == nil {
		out.walBytes = wal / float64(n)
	}
	return out
}

// statFields are a process's /proc/<pid>/stat fields after "(comm)".
func statFields(pid int) []string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

// ticks is a process's utime + stime (fields 14 and 15 of stat).
func ticks(pid int) int64 { return fieldPair(pid, 11) }

func parentOf(pid int) int {
	f := statFields(pid)
	if len(f) < 2 {
		return 0
	}
	p, _ := strconv.Atoi(f[1])
	return p
}

// reapedTicks is the CPU of a process's children that have exited and been
// waited for (cutime + cstime, fields 16 and 17 of stat).
func reapedTicks(pid int) int64 { return fieldPair(pid, 13) }

// fieldPair is the sum of stat fields i and i+1 after "(comm)" (0 when
// the process is gone).
func fieldPair(pid, i int) int64 {
	f := statFields(pid)
	if len(f) < i+2 {
		return 0
	}
	a, _ := strconv.ParseInt(f[i], 10, 64)
	b, _ := strconv.ParseInt(f[i+1], 10, 64)
	return a + b
}

// treeTicks is the CPU of a postmaster and its children (backends,
// checkpointer, WAL writer, ...), including the children that have exited
// since: a backend whose connection closed mid-run takes its CPU out of the
// live sum, and the postmaster, which reaps it, gains it as cutime/cstime.
func treeTicks(root int) int64 {
	total := ticks(root) + reapedTicks(root)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if parentOf(pid) == root {
			total += ticks(pid)
		}
	}
	return total
}

// findProcess is the pid of the one process whose comm is name (0 when
// none or several).
func findProcess(name string) int {
	entries, _ := os.ReadDir("/proc")
	found := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil || strings.TrimSpace(string(b)) != name {
			continue
		}
		if found != 0 {
			return 0
		}
		found = pid
	}
	return found
}

// closedLoop keeps c.closed requests in flight for the warm-up and the
// measured duration; latency is from each request's send.
func closedLoop(ctx context.Context, c config, fx *fixture) (*result, error) {
	n := max(c.conns, c.streams)
	conns := make([]*grpc.ClientConn, n)
	for i := range conns {
		cc, err := dial(c, fx.token)
		if err != nil {
			return nil, err
		}
		defer cc.Close()
		conns[i] = cc
	}
	decide := unaryCall(c.mode, fx, conns)
	var (
		seq      atomic.Int64
		errs     atomic.Int64
		denies   atomic.Int64
		mu       sync.Mutex
		lat      []time.Duration
		measured atomic.Bool
		answered atomic.Int64
		wg       sync.WaitGroup
	)
	errCodes := &codeCounts{}
	start := time.Now()
	stop := start.Add(c.warmup + c.duration)
	var admittedBefore *buckets // at the end of the warm-up
	marked := make(chan struct{})
	go func() {
		defer close(marked)
		time.Sleep(c.warmup)
		admittedBefore = scrapeBuckets(c.metrics, admittedMetric)
		measured.Store(true)
	}()
	var mStart time.Time
	var mOnce sync.Once
	ask := func(w int) {
		defer wg.Done()
		local := make([]time.Duration, 0, 1024)
		defer func() {
			mu.Lock()
			lat = append(lat, local...)
			mu.Unlock()
		}()
		for time.Now().Before(stop) {
			i := int(seq.Add(1))
			t0 := time.Now()
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			resp, err := decide(cctx, w, fx.request(i))
			cancel()
			if err == nil {
				answered.Add(1)
			}
			// A shed decision waits for the server's retry hint, as the
			// runner does; asking again at once only feeds the overload.
			if d, shed := shedDelay(err); shed && c.honourRetry {
				time.Sleep(d)
			}
			if !measured.Load() {
				continue
			}
			mOnce.Do(func() { mStart = t0 })
			if err != nil {
				errs.Add(1)
				errCodes.add(err)
				continue
			}
			if resp.GetDecision().GetEffect() != guardv1.Effect_EFFECT_ALLOW {
				denies.Add(1)
			}
			local = append(local, time.Since(t0))
		}
	}
	if c.mode != "unary" && c.mode != "openfga" {
		return nil, fmt.Errorf("-closed runs -mode unary (Guard.Decide) or openfga; for DecideStream use the open loop at a high -rate")
	}
	for w := range c.closed {
		wg.Add(1)
		go ask(w)
	}
	wg.Wait()
	<-marked
	r := &result{mode: fmt.Sprintf("closed %d", c.closed), errors: errs.Load(), denies: denies.Load(), lat: lat, errCodes: errCodes.String(),
		calls: seq.Load(), admitted: summarizeAdmitted(scrapeBuckets(c.metrics, admittedMetric).since(admittedBefore))}
	sortDurations(r.lat)
	r.svc = r.lat
	r.completed = int(answered.Load())
	if !mStart.IsZero() {
		r.achieved = float64(len(r.lat)) / time.Since(mStart).Seconds()
	}
	r.rate = r.achieved
	return r, nil
}

// shedDelay reports whether err is the server's admission refusal and how
// long it asks to wait (100ms when it names no delay), as the runner's
// decide client reads it.
func shedDelay(err error) (time.Duration, bool) {
	st, ok := status.FromError(err)
	if !ok || err == nil || st.Code() != codes.ResourceExhausted {
		return 0, false
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay().AsDuration() > 0 {
			return ri.GetRetryDelay().AsDuration(), true
		}
	}
	return 100 * time.Millisecond, true
}
