package main

import (
	"sync"
	"testing"
)

// Every call handed to the senders runs exactly once, whether an idle
// sender takes it or a new one starts.
func TestSendersRunEveryCallOnce(t *testing.T) {
	s := newSenders()
	const calls = 2000
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		runs = make(map[int]int)
	)
	for i := range calls {
		wg.Add(1)
		s.run(func() {
			defer wg.Done()
			mu.Lock()
			runs[i]++
			mu.Unlock()
		})
	}
	wg.Wait()
	s.close()
	if len(runs) != calls {
		t.Fatalf("%d of %d calls ran", len(runs), calls)
	}
	for i, n := range runs {
		if n != 1 {
			t.Fatalf("call %d ran %d times", i, n)
		}
	}
}
