package console_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/clawguard/clawguard/server/internal/testserver"
)

// Issue 29 (5, 12): a click in the console while the database cannot take
// it (the click's write refused with SQLSTATE 53100, a full disk's answer,
// raised by a trigger that counts its refusals) was shown as a failure page.
// The console asks again after the server's hint, the same click, and the
// approval lands once the database takes writes again.
func TestAConsoleClickIsAskedAgainWhileTheDatabaseCannotTakeIt(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	hold := f.ask(t, "hello ops").GetHoldId()
	dana := newBrowser(t, f.base)
	csrf := dana.signIn(f.dana)

	for _, q := range []string{
		`CREATE SEQUENCE fault_refusals`,
		`CREATE FUNCTION fault_disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM nextval('fault_refusals');
		      RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $$`,
		`CREATE TRIGGER fault_disk_full BEFORE INSERT ON hold_events FOR EACH ROW EXECUTE FUNCTION fault_disk_full()`,
	} {
		if _, err := f.srv.Pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	code := make(chan int, 1)
	go func() {
		resp, _ := dana.post("/holds/"+hold+"/resolve", url.Values{"csrf": {csrf}, "outcome": {"approve"}})
		code <- resp.StatusCode
	}()
	testserver.Eventually(t, 15*time.Second, "the click refused twice (asked again)", func() bool {
		var n int64
		var called bool
		_ = f.srv.Pool.QueryRow(ctx, `SELECT last_value, is_called FROM fault_refusals`).Scan(&n, &called)
		return called && n >= 2
	})
	if _, err := f.srv.Pool.Exec(ctx, `DROP TRIGGER fault_disk_full ON hold_events`); err != nil {
		t.Fatal(err)
	}
	if c := <-code; c != http.StatusSeeOther {
		t.Fatalf("the click: HTTP %d, want 303 to the hold's page", c)
	}
	var st string
	if err := f.srv.Pool.QueryRow(ctx, `SELECT status FROM holds WHERE id = $1`, hold).Scan(&st); err != nil || st != "approved" {
		t.Fatalf("hold %s (%v), want approved", st, err)
	}
}
