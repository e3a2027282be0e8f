package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/clawguard/clawguard/migrations/pgtest"
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

// Signing in while the server cannot reach its database was answered
// "that token was not accepted" (401): a refusal nobody made. It is 503,
// in our words, and the same token signs in once the database is back.
func TestSignInWithoutTheDatabaseIsUnavailableNotRefused(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	dana := newBrowser(t, f.base)
	_, page := dana.get("/signin")
	csrf := csrfOf(t, page)

	admin, err := pgx.Connect(ctx, pgtest.AdminURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	u, err := url.Parse(f.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	db := pgx.Identifier{name}.Sanitize()
	if _, err := admin.Exec(ctx, `ALTER DATABASE `+db+` ALLOW_CONNECTIONS false`); err != nil {
		t.Fatal(err)
	}
	allow := func() { _, _ = admin.Exec(context.Background(), `ALTER DATABASE `+db+` ALLOW_CONNECTIONS true`) }
	defer allow()
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, name); err != nil {
		t.Fatal(err)
	}
	resp, body := dana.post("/signin", url.Values{"csrf": {csrf}, "token": {f.dana}, "next": {"/holds"}})
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "the database is unavailable") || strings.Contains(body, "not accepted") {
		t.Fatalf("sign-in without the database: %d\n%s", resp.StatusCode, body)
	}
	allow()
	// The pool's connections the database dropped each fail once more:
	// the user signs in again, as after any outage.
	testserver.Eventually(t, 15*time.Second, "the same token signing in once the database is back", func() bool {
		_, page := dana.get("/signin")
		resp, _ := dana.post("/signin", url.Values{"csrf": {csrfOf(t, page)}, "token": {f.dana}, "next": {"/holds"}})
		return resp.StatusCode == http.StatusSeeOther
	})
}
