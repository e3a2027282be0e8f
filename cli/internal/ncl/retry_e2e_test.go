package ncl

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// lockedBuffer is a bytes.Buffer safe to read while ncl writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Issue 29 (5, 12): a click while the database cannot take it (here the
// server's Postgres refuses the click's write with SQLSTATE 53100, a full
// disk's answer, raised by a trigger) was reported as a failure. The server
// answers Unavailable with a hint; ncl asks again, the same request, and
// the approval lands once the database takes writes again.
func TestApproveIsAskedAgainWhileTheDatabaseCannotTakeIt(t *testing.T) {
	srv := startRealServer(t)
	g := strings.TrimSpace(srv.must(t, "groups", "create", "--name", "research", "--cli-scope", "group", "-q"))
	srv.must(t, "users", "create", "--id", "telegram:dana", "--display-name", "Dana")
	hold := requestHold(t, srv, g)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := pgx.Connect(ctx, srv.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	if _, err := db.Exec(ctx, `
		CREATE FUNCTION fault_disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $$;
		CREATE TRIGGER fault_disk_full BEFORE INSERT ON hold_events FOR EACH ROW EXECUTE FUNCTION fault_disk_full()`); err != nil {
		t.Fatal(err)
	}

	var out, errb lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"approvals", "approve", hold, "--as", "telegram:dana"}, &out, &errb, srv.env())
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(errb.String(), "trying again") {
		if time.Now().After(deadline) {
			t.Fatalf("ncl did not say it retries; stderr so far: %q", errb.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := db.Exec(ctx, `DROP TRIGGER fault_disk_full ON hold_events; DROP FUNCTION fault_disk_full()`); err != nil {
		t.Fatal(err)
	}
	if code := <-done; code != 0 || !strings.Contains(out.String(), "approved hold "+hold) {
		t.Fatalf("approve: exit %d\nstdout: %s\nstderr: %s", code, out.String(), errb.String())
	}
	if !strings.Contains(errb.String(), "the database is unavailable") || strings.Contains(errb.String(), "No space left") {
		t.Errorf("stderr %q: want the server's words, never the database's", errb.String())
	}
	var resolved int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM hold_events WHERE hold_id = $1 AND type = 'resolved'`, hold).Scan(&resolved); err != nil || resolved != 1 {
		t.Fatalf("%d resolved events (%v), want exactly 1", resolved, err)
	}
}
