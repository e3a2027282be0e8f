package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// heartbeat keeps the event stream's connection open through proxies and
// re-checks the session, so a sign-out, an expiry or a revoked token ends
// the stream too.
var heartbeat = 10 * time.Second

// liveEvent is what the page's script needs to know: which hold changed.
type liveEvent struct {
	Type    string `json:"type"` // requested | resolved
	Hold    string `json:"hold"`
	Kind    string `json:"kind"`
	Status  string `json:"status"`
	Outcome string `json:"outcome,omitempty"`
}

// events streams the user's hold events (Approvals.Watch as that user) as
// server-sent events. A reconnecting browser sends Last-Event-ID (the
// cursor) and resumes after it.
func (c *Console) events(w http.ResponseWriter, r *http.Request, s *session) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	req := &guardv1.WatchRequest{FromNow: true}
	if id, err := strconv.ParseInt(r.Header.Get("Last-Event-ID"), 10, 64); err == nil && id > 0 {
		req = &guardv1.WatchRequest{AfterCursor: id}
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var (
		mu   sync.Mutex
		open bool
	)
	write := func(s string) error {
		mu.Lock()
		defer mu.Unlock()
		if _, err := fmt.Fprint(w, s); err != nil {
			return err
		}
		fl.Flush()
		return nil
	}
	// The response starts only once the subscription is live, so a page
	// that saw the stream open misses no event after that.
	started := func() error {
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Accel-Buffering", "no")
		w.WriteHeader(http.StatusOK)
		mu.Lock()
		open = true
		mu.Unlock()
		go c.keepAlive(ctx, cancel, r, write)
		return write(": connected\n\n")
	}
	err := c.d.Backend.Watch(ctx, s.caller(), req, started, func(ev *guardv1.WatchResponse) error {
		le := liveEvent{Type: "requested", Hold: ev.GetHold().GetId(), Kind: ev.GetHold().GetKind(), Status: enumword.String(ev.GetHold().GetStatus())}
		if ev.GetType() == guardv1.EventType_EVENT_TYPE_RESOLVED {
			le.Type, le.Outcome = "resolved", enumword.String(ev.GetOutcome())
		}
		b, _ := json.Marshal(le)
		return write(fmt.Sprintf("id: %d\nevent: hold\ndata: %s\n\n", ev.GetCursor(), b))
	})
	mu.Lock()
	wasOpen := open
	mu.Unlock()
	switch {
	case err == nil || ctx.Err() != nil:
	case !wasOpen:
		c.failRPC(w, r, s, err)
	default:
		// The browser reconnects (with its last id) after this.
		_ = write("event: error\ndata: " + strconv.Quote(err.Error()) + "\n\n")
	}
}

// keepAlive pings the stream and re-checks the session every heartbeat, so
// a sign-out, an expiry or a revoked token ends the stream too.
func (c *Console) keepAlive(ctx context.Context, cancel context.CancelFunc, r *http.Request, write func(string) error) {
	t := time.NewTicker(heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		live, err := c.load(ctx, r)
		if err != nil || live == nil || write(": ping\n\n") != nil {
			cancel()
			return
		}
	}
}
