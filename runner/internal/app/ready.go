package app

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/clawguard/clawguard/proto/retry"
)

// readyGrace is how long both streams may be down, once they were up,
// before the runner says it is not ready: a move to another replica takes
// a fraction of it, and the lease (renewed on registration) outlives it.
const readyGrace = 3 * time.Second

// readiness is what /readyz says: not ready while the runner is fenced
// (its agents stopped), while a session of a --group could not be opened,
// before both streams were ever up, or while one of them is down longer
// than readyGrace.
type readiness struct {
	up       [2]bool   // decide, connect
	everUp   bool      // both were up at least once
	downAt   time.Time // when one went down (zero while both are up)
	unopened map[string]string
}

// ready reports whether the runner is ready, and if not, why.
func (r *Runner) ready() (bool, string) {
	if r.lease.Fenced() {
		return false, "fenced: the lease was not renewed in time; agents stopped until it is"
	}
	r.upMu.Lock()
	defer r.upMu.Unlock()
	if len(r.rd.unopened) > 0 {
		var groups []string
		for g, why := range r.rd.unopened {
			groups = append(groups, g+" ("+why+")")
		}
		sort.Strings(groups)
		return false, "sessions not open for --group " + strings.Join(groups, "; ")
	}
	switch {
	case !r.rd.everUp:
		return false, "not connected to the server yet"
	case !r.rd.downAt.IsZero() && time.Since(r.rd.downAt) > readyGrace:
		return false, fmt.Sprintf("not connected to the server for %s", time.Since(r.rd.downAt).Round(time.Second))
	}
	return true, ""
}

func (r *Runner) setUp(i int, up bool) {
	r.upMu.Lock()
	defer r.upMu.Unlock()
	r.rd.up[i] = up
	both := r.rd.up[0] && r.rd.up[1]
	switch {
	case both:
		r.rd.everUp = true
		r.rd.downAt = time.Time{}
	case r.rd.downAt.IsZero():
		r.rd.downAt = time.Now()
	}
	r.Metrics.SetStreamConnected(both)
}

// openGroups opens a session of each --group (an id or a name), trying a
// group whose session could not open again with back-off (1 s doubling to
// 30 s) until it opens or ctx ends; the runner is not ready meanwhile.
func (r *Runner) openGroups(ctx context.Context) {
	pending := map[string]bool{}
	r.upMu.Lock()
	r.rd.unopened = map[string]string{}
	for _, g := range r.Config.Groups {
		pending[g] = true
		r.rd.unopened[g] = "not tried yet"
	}
	r.upMu.Unlock()
	delays := retry.Exponential(time.Second, 30*time.Second)
	for len(pending) > 0 && ctx.Err() == nil {
		for g := range pending {
			_, err := r.OpenSession(ctx, g)
			r.upMu.Lock()
			if err == nil {
				delete(pending, g)
				delete(r.rd.unopened, g)
			} else {
				r.rd.unopened[g] = err.Error()
			}
			r.upMu.Unlock()
			if err != nil && ctx.Err() == nil {
				r.Log.Error("could not open a session for the group; trying again (not ready until it opens)", "group", g, "err", err)
			}
		}
		if len(pending) == 0 {
			return
		}
		t := time.NewTimer(delays.NextBackOff())
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
}
