package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The CPU the processes of the guarded path spend per call: what the
// runner and clawguard-mcp do besides waiting (from /proc: the measured
// period's user and system time). The server's and Postgres's are
// decideload's to measure.

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat.
const clockTicks = 100

// cpuTicks is a process's user+system CPU so far, in clock ticks (-1 when
// it cannot be read).
func cpuTicks(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// The fields after the command (which may hold spaces) in parentheses.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return -1
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

// cpuWatch samples named processes when the measured period starts and
// when it ends.
type cpuWatch struct {
	mu    sync.Mutex
	pids  map[string][]int
	start map[string]int64
	spent map[string]time.Duration
}

func newCPUWatch(pids map[string][]int) *cpuWatch {
	return &cpuWatch{pids: pids, start: map[string]int64{}, spent: map[string]time.Duration{}}
}

func (w *cpuWatch) sum(name string) int64 {
	var n int64
	for _, pid := range w.pids[name] {
		if t := cpuTicks(pid); t >= 0 {
			n += t
		}
	}
	return n
}

func (w *cpuWatch) begin() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for name := range w.pids {
		w.start[name] = w.sum(name)
	}
}

func (w *cpuWatch) end() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for name := range w.pids {
		w.spent[name] = time.Duration(w.sum(name)-w.start[name]) * time.Second / clockTicks
	}
}

// perCall is name's CPU per call, over calls.
func (w *cpuWatch) perCall(name string, calls int) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if calls == 0 || len(w.pids[name]) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0fµs", float64(w.spent[name].Microseconds())/float64(calls))
}
