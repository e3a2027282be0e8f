package registry_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/app"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/config"
	"github.com/clawguard/clawguard/server/internal/listener"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// The replica's one listener serves both NOTIFY channels. Its backend is
// killed: a hold event and a runner push committed right after still wake
// their readers (the catch-up after the reconnect), and so do the ones
// committed once it is back (NOTIFY on the new connection). Both poll
// fallbacks are an hour here, so nothing but the listener can deliver them.
func TestListenerLossStillWakesHoldEventsAndRunnerPushes(t *testing.T) {
	t.Parallel()
	srv := testserver.StartTuned(t, func(d *app.Parts) {
		d.Approvals.PollInterval = time.Hour
		d.Registry.SetRescanInterval(time.Hour)
	}, func(c *config.Config) { c.PushAckDeadline = 2 * time.Hour })
	if _, err := srv.Pool.Exec(ctxT(t), `INSERT INTO users (id) VALUES ('local:owner');
		INSERT INTO user_roles (user_id, role) VALUES ('local:owner', 'owner')`); err != nil {
		t.Fatal(err)
	}
	r := newRunner(t, srv, "runner-a", "h1", nil)
	r.mustRegister(t)
	sess := r.open(t, group(t, srv, "g", ""))
	st := r.connect(t)
	st.heartbeat(t) // the stream is up and has scanned (nothing pending)

	events := make(chan *guardv1.WatchResponse, 16)
	following := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		_ = srv.Deps().Approvals.FollowFrom(ctx, 0, true, nil,
			func(int64) error { close(following); return nil },
			func(ev *guardv1.WatchResponse) error { events <- ev; return nil })
	}()
	<-following

	first := listenerPID(t, srv, 0)
	if _, err := srv.Pool.Exec(ctxT(t), `SELECT pg_terminate_backend($1)`, first); err != nil {
		t.Fatal(err)
	}
	// Committed while the listener is down or reconnecting.
	hold := createHold(t, srv, "during")
	push := enqueue(t, srv, sess.GetId(), "during")
	wantEvent(t, events, hold)
	if p := st.next(t); p.GetId() != push {
		t.Fatalf("push after the listener loss = %s, want %s", p.GetId(), push)
	}

	// Committed once the listener is back on a new connection.
	listenerPID(t, srv, first)
	hold = createHold(t, srv, "after")
	push = enqueue(t, srv, sess.GetId(), "after")
	wantEvent(t, events, hold)
	if p := st.next(t); p.GetId() != push {
		t.Fatalf("push after the reconnect = %s, want %s", p.GetId(), push)
	}
}

// listenerPID waits for a listener connection of the replica other than
// not, listening, and returns its backend pid.
func listenerPID(t *testing.T, srv *testserver.Server, not int32) int32 {
	t.Helper()
	var pid int32
	eventually(t, "the listener's connection", func() bool {
		err := srv.Pool.QueryRow(ctxT(t), `SELECT pid FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = $1 AND pid <> $2
			AND query ILIKE 'listen %' AND state = 'idle'`, listener.AppName, not).Scan(&pid)
		return err == nil
	})
	return pid
}

func createHold(t *testing.T, srv *testserver.Server, title string) string {
	t.Helper()
	var res approvals.CreateResult
	err := pgx.BeginFunc(ctxT(t), srv.Pool, func(tx pgx.Tx) error {
		var err error
		res, err = srv.Deps().Approvals.CreateHoldTx(ctxT(t), tx, approvals.CreateRequest{Kind: "test_listener", Title: title, DedupKey: title})
		return err
	})
	if err != nil || res.Hold == nil {
		t.Fatalf("create hold %q: %v %+v", title, err, res)
	}
	return res.Hold.GetId()
}

func wantEvent(t *testing.T, events <-chan *guardv1.WatchResponse, holdID string) {
	t.Helper()
	select {
	case ev := <-events:
		if ev.GetHold().GetId() != holdID {
			t.Fatalf("event for %s, want %s", ev.GetHold().GetId(), holdID)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no event for %s within 10s", holdID)
	}
}
