package main

import (
	"fmt"
	"sort"
	"sync"
	"time"
)

type result struct {
	lat      []time.Duration
	errors   int
	firstErr error
}

// openLoop issues calls of every path at c.rate each, interleaved (tick i
// runs path i mod len(paths)), for warm-up + duration, each on its own
// goroutine at its scheduled time, and measures from that time.
func openLoop(c config, paths []func(i int) error) []result {
	n := len(paths)
	interval := time.Duration(float64(time.Second) / (c.rate * float64(n)))
	total := int((c.warmup + c.duration) / interval)
	warm := int(c.warmup / interval)
	var (
		mu  sync.Mutex
		res = make([]result, n)
		wg  sync.WaitGroup
	)
	start := time.Now()
	for i := range total {
		at := start.Add(time.Duration(i) * interval)
		time.Sleep(time.Until(at))
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := i % n
			err := paths[p](i / n)
			took := time.Since(at)
			if i < warm {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			r := &res[p]
			if err != nil {
				r.errors++
				if r.firstErr == nil {
					r.firstErr = err
				}
				return
			}
			r.lat = append(r.lat, took)
		}()
	}
	wg.Wait()
	for p := range res {
		sort.Slice(res[p].lat, func(a, b int) bool { return res[p].lat[a] < res[p].lat[b] })
	}
	return res
}

func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p / 100)
	return sorted[i]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3fms", float64(d)/float64(time.Millisecond)) }
