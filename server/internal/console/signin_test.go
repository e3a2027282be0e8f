package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/clawguard/clawguard/server/internal/authn"
	"github.com/clawguard/clawguard/server/internal/console"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// Signing in: the session cookie, CSRF, expiry, TLS, and redirects that
// stay on the console.

func TestSignInSessionCookieCSRFAndExpiry(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	b := newBrowser(t, f.base)

	// Signed out: pages send the browser to sign-in; streams get 401.
	if resp, _ := b.get("/holds"); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/signin") {
		t.Fatalf("signed-out /holds: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := b.get("/events"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("signed-out /events: %d", resp.StatusCode)
	}

	// The sign-in form itself carries a CSRF token bound to a pre-session cookie.
	resp, page := b.get("/signin")
	if pre := cookieNamed(resp, console.PreSessionCookie); pre == nil || !pre.HttpOnly || pre.SameSite != http.SameSiteStrictMode {
		t.Fatalf("pre-session cookie: %+v", pre)
	}
	if resp, _ := b.post("/signin", url.Values{"csrf": {"forged"}, "token": {f.dana}}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("sign-in with a forged CSRF token: %d", resp.StatusCode)
	}
	// Only user tokens sign in; a wrong token says so without a session.
	for _, tok := range []string{f.srv.OperatorToken, "cgt_not-a-token"} {
		_, page = b.get("/signin")
		resp, body := b.post("/signin", url.Values{"csrf": {csrfOf(t, page)}, "token": {tok}})
		if resp.StatusCode != http.StatusUnauthorized || cookieNamed(resp, console.SessionCookie) != nil {
			t.Fatalf("sign-in with %.8s…: %d %s", tok, resp.StatusCode, body)
		}
	}

	_, page = b.get("/signin")
	resp, _ = b.post("/signin", url.Values{"csrf": {csrfOf(t, page)}, "token": {f.dana}, "next": {"//evil.example/x"}})
	sc := cookieNamed(resp, console.SessionCookie)
	switch {
	case resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/holds":
		t.Fatalf("sign-in: %d → %q (an off-site next must not be followed)", resp.StatusCode, resp.Header.Get("Location"))
	case sc == nil || !sc.HttpOnly || sc.SameSite != http.SameSiteStrictMode || sc.Secure || sc.Path != "/" || sc.MaxAge <= 0:
		t.Fatalf("session cookie flags: %+v (HttpOnly, SameSite=Strict, Path=/, expiring; Secure only with TLS)", sc)
	}
	// Only the cookie's hash is stored.
	var stored int
	if err := f.srv.Pool.QueryRow(ctx, `SELECT count(*) FROM console_sessions WHERE id_hash = sha256(convert_to($1, 'UTF8')) AND user_id = 'telegram:dana'`,
		sc.Value).Scan(&stored); err != nil || stored != 1 {
		t.Fatalf("stored sessions by hash: %d %v", stored, err)
	}
	resp, body := b.get("/holds")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "telegram:dana") {
		t.Fatalf("/holds signed in: %d", resp.StatusCode)
	}
	csrf := csrfOf(t, body)
	if h := resp.Header.Get("Content-Security-Policy"); !strings.Contains(h, "script-src 'self'") || !strings.Contains(h, "frame-ancestors 'none'") {
		t.Errorf("CSP: %q", h)
	}

	// Every form needs the session's CSRF token, from this origin.
	if resp, _ := b.post("/signout", url.Values{}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("sign-out without CSRF: %d", resp.StatusCode)
	}
	if resp, _ := b.post("/signout", url.Values{"csrf": {csrf}}, "Origin", "http://evil.example"); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-origin sign-out: %d", resp.StatusCode)
	}
	if resp, _ := b.get("/holds"); resp.StatusCode != http.StatusOK {
		t.Fatalf("refused forms ended the session: %d", resp.StatusCode)
	}

	// Sessions expire; a revoked token ends its sessions at once.
	if _, err := f.srv.Pool.Exec(ctx, `UPDATE console_sessions SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	if resp, _ := b.get("/holds"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("expired session still served: %d", resp.StatusCode)
	}
	// So does its token's expiry (issue 34).
	csrf = b.signIn(f.dana)
	if _, err := f.srv.Pool.Exec(ctx, `UPDATE tokens SET expires_at = now() WHERE user_id = 'telegram:dana'`); err != nil {
		t.Fatal(err)
	}
	if resp, _ := b.get("/holds"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("session of an expired token still served: %d", resp.StatusCode)
	}
	if _, err := f.srv.Pool.Exec(ctx, `UPDATE tokens SET expires_at = NULL WHERE user_id = 'telegram:dana'`); err != nil {
		t.Fatal(err)
	}
	csrf = b.signIn(f.dana)
	if _, err := f.srv.Pool.Exec(ctx, `UPDATE tokens SET revoked_at = now() WHERE user_id = 'telegram:dana'`); err != nil {
		t.Fatal(err)
	}
	if resp, _ := b.get("/holds"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("session of a revoked token still served: %d", resp.StatusCode)
	}

	// Sign-out deletes the session and clears the cookie.
	b2 := newBrowser(t, f.base)
	csrf = b2.signIn(f.eve)
	resp, _ = b2.post("/signout", url.Values{"csrf": {csrf}})
	if c := cookieNamed(resp, console.SessionCookie); resp.StatusCode != http.StatusSeeOther || c == nil || c.MaxAge >= 0 {
		t.Fatalf("sign-out: %d %+v", resp.StatusCode, c)
	}
	var left int
	_ = f.srv.Pool.QueryRow(ctx, `SELECT count(*) FROM console_sessions WHERE user_id = 'telegram:eve'`).Scan(&left)
	if left != 0 {
		t.Fatalf("%d sessions left after sign-out", left)
	}
}

// With TLS the cookies are Secure (checked on the handler: no certificate needed).
func TestCookiesAreSecureWithTLS(t *testing.T) {
	srv := testserver.Start(t)
	c := console.New(console.Deps{Pool: srv.Pool, Auth: authn.NewAuthenticator(srv.Pool), Secure: true})
	rec := httptest.NewRecorder()
	c.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/signin", nil))
	resp := rec.Result()
	if pre := cookieNamed(resp, console.PreSessionCookie); pre == nil || !pre.Secure || !pre.HttpOnly {
		t.Fatalf("pre-session cookie with TLS: %+v", pre)
	}
}

// Sign-in sends the browser only to a console page: every off-site
// variant, posted as the form's next or given to the sign-in page, lands
// on the home page, read from the Location header a browser follows.
func TestSignInNeverRedirectsOffSite(t *testing.T) {
	f := start(t)
	b := newBrowser(t, f.base)
	nextField := regexp.MustCompile(`name="next" value="([^"]*)"`)
	for _, next := range append(console.OffSiteTargets, "/holds/hold_1?x=1") {
		want := "/holds"
		if next == "/holds/hold_1?x=1" {
			want = next // a console page survives
		}
		_, page := b.get("/signin?next=" + url.QueryEscape(next))
		if m := nextField.FindStringSubmatch(page); m == nil || m[1] != want {
			t.Errorf("sign-in page for next=%q carries next %v, want %q", next, m, want)
		}
		resp, body := b.post("/signin", url.Values{"csrf": {csrfOf(t, page)}, "token": {f.dana}, "next": {next}})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != want {
			t.Errorf("sign-in with next=%q: %d Location %q, want %q (%.200s)", next, resp.StatusCode, resp.Header.Get("Location"), want, body)
		}
	}
}
