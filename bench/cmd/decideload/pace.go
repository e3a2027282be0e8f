package main

import (
	"runtime"
	"syscall"
	"time"
)

// pace calls fire(i) for i in [0, total) at start + i*interval, in order,
// from one goroutine locked to its OS thread that waits with nanosleep(2).
// Go's timers cannot pace an open loop here: the runtime's netpoller waits
// in whole milliseconds, so a 500 µs time.Sleep takes ~1.1 ms and most
// requests would leave up to a millisecond late — the generator's lag,
// counted against the server (latency is measured from the scheduled
// time). nanosleep wakes within ~0.1 ms. A fire that is late sends at once;
// fire returns false to stop.
func pace(start time.Time, interval time.Duration, total int, fire func(i int, sched time.Time) bool) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for i := range total {
			sched := start.Add(time.Duration(i) * interval)
			if d := time.Until(sched); d > 0 {
				ts := syscall.NsecToTimespec(int64(d))
				for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
				}
			}
			if !fire(i, sched) {
				return
			}
		}
	}()
	<-done
}

// senders runs each call of an open loop on a goroutine kept from an
// earlier call when one is idle. A fresh goroutine per call regrew its
// stack through gRPC's client path every time (runtime.newstack was 6 % of
// decideload's CPU at 2,000/s), CPU that the server on the same machine
// then lacked. The pacer never waits for a sender: with none idle, a new one
// starts, and it stays for later calls until close.
type senders struct{ idle chan func() }

func newSenders() *senders { return &senders{idle: make(chan func())} }

// run hands f to an idle sender, or starts one.
func (s *senders) run(f func()) {
	select {
	case s.idle <- f:
	default:
		go func() {
			f()
			for f := range s.idle {
				f()
			}
		}()
	}
}

// close lets the senders end; run must not be called after it.
func (s *senders) close() { close(s.idle) }
