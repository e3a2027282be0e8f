package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// chromium finds headless Chromium (Debian's chromium package; make test
// installs it). Missing under CI=true is a failure, never a silent skip.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium not found: apt-get install chromium (deploy/local/test.sh does)")
	}
	t.Skip("chromium not found (apt-get install chromium); the browser test needs it")
	return ""
}

// newTab starts a fresh headless browser (its own cookie store).
func newTab(t *testing.T, exe string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.Flag("disable-gpu", true),
		chromedp.Flag("hide-scrollbars", true), chromedp.WindowSize(1180, 760),
		// Chromium's own log (D-Bus noise in a container) is not the test's.
		chromedp.CombinedOutput(io.Discard))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	tab, cancelTab := chromedp.NewContext(actx)
	// The first Do starts the browser, which lives as long as that call's
	// context: the tab's, never one with a deadline.
	if err := chromedp.Do(tab); err != nil {
		cancelTab()
		cancelAlloc()
		t.Fatalf("start chromium: %v", err)
	}
	ctx, cancelTimeout := context.WithTimeout(tab, 90*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancelTab(); cancelAlloc() })
	return ctx
}

// do runs steps, failing the test with where the page was and what it showed.
func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		failAt(t, ctx, what, err)
	}
}

// get runs one action that returns a value.
func get[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		failAt(t, ctx, what, err)
	}
	return v
}

func failAt(t *testing.T, ctx context.Context, what string, err error) {
	t.Helper()
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	loc, _ := chromedp.Run(c, chromedp.Location())
	body, _ := chromedp.Run(c, chromedp.OuterHTML(chromedp.CSS("body")))
	t.Fatalf("%s: %v (at %s)\n%s", what, err, loc, body)
}

// screenshot saves the viewport as a PNG: into CLAWGUARD_SCREENSHOT_DIR
// when set (the README's pictures come from there), else a temp dir.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	saveShot(t, name, os.Getenv("CLAWGUARD_SCREENSHOT_DIR"), get(t, ctx, "screenshot "+name, chromedp.CaptureScreenshot()))
}

// fullScreenshot is screenshot of the whole page, not only the viewport.
func fullScreenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	saveShot(t, name, os.Getenv("CLAWGUARD_SCREENSHOT_DIR"), get(t, ctx, "screenshot "+name, chromedp.FullScreenshot(100)))
}

// saveShot writes a screenshot into dir (a temp dir when "").
func saveShot(t *testing.T, name, dir string, png []byte) {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	if len(png) < 1000 || string(png[1:4]) != "PNG" {
		t.Fatalf("screenshot %s is not a PNG (%d bytes)", name, len(png))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

func signInBrowser(t *testing.T, ctx context.Context, base, token string) {
	t.Helper()
	do(t, ctx, "sign in",
		chromedp.Navigate(base+"/holds"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="token"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), token),
		chromedp.Submit(chromedp.CSS(`input[name="token"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#holds`)),
		// The page's script has its event stream open.
		chromedp.WaitVisible(chromedp.CSS(`#live.on`)),
	)
}

// In a real browser: Dana signs in, watches a hold appear live when the
// agent asks, opens it, approves it and sees the replay's ALLOW arrive;
// Eve gets no button and her forged POST is refused; a cross-site page's
// auto-submitted approval is refused; the cookie's flags are as promised.
func TestBrowserApprovesAHoldLive(t *testing.T) {
	exe := chromium(t)
	f := start(t)
	named(t, f) // the groups and users by name, as the README shows them
	ctx := newTab(t, exe)
	signInBrowser(t, ctx, f.base, f.dana)

	cookies := get(t, ctx, "read cookies", func(ctx context.Context, tg *chromedp.Target) (network.GetCookiesResult, error) {
		return cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{})
	})
	var session *network.Cookie
	for _, c := range cookies.Cookies {
		if c.Name == "cg_session" {
			session = c
		}
	}
	if session == nil || !session.HTTPOnly || session.SameSite != network.CookieSameSiteStrict || session.Secure {
		t.Fatalf("session cookie in the browser: %+v", session)
	}
	if scriptSees := get(t, ctx, "document.cookie", chromedp.Evaluate[string](`document.cookie`)); strings.Contains(scriptSees, "cg_session") {
		t.Fatalf("page script can read the session cookie: %q", scriptSees)
	}

	// The agent asks; the hold appears in the open page without a reload.
	held := f.ask(t, "deploy notes ready")
	hold := held.GetHoldId()
	row := fmt.Sprintf(`tr[data-hold=%q]`, hold)
	do(t, ctx, "hold appears live", chromedp.WaitVisible(chromedp.CSS(row)))
	screenshot(t, ctx, "pending")

	do(t, ctx, "open the hold",
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).click()`, row+` a`)),
		chromedp.WaitVisible(chromedp.CSS(`#approve`)))
	page := get(t, ctx, "read the hold page", chromedp.Text(chromedp.CSS(`#hold`)))
	for _, want := range []string{"deploy notes ready", "to ops: deploy notes ready", "Research lab", "only Dana (telegram:dana)", "a2a_message_gate", "requested"} {
		if !strings.Contains(page, want) {
			t.Fatalf("hold page lacks %q:\n%s", want, page)
		}
	}
	screenshot(t, ctx, "hold")

	// Eve may not resolve it: no page, no button; her forged POST (with her
	// own valid CSRF token) is refused.
	eve := newTab(t, exe)
	signInBrowser(t, eve, f.base, f.eve)
	do(t, eve, "Eve opens the hold", chromedp.Navigate(f.base+"/holds/"+hold))
	eveBody := get(t, eve, "Eve's page", chromedp.Text(chromedp.CSS(`main`)))
	buttons := get(t, eve, "Eve's buttons", chromedp.Evaluate[int](`document.querySelectorAll('#approve, #reject').length`))
	if buttons != 0 || !strings.Contains(eveBody, "not found") {
		t.Fatalf("Eve's view of the hold (%d buttons):\n%s", buttons, eveBody)
	}
	do(t, eve, "Eve's pending list", chromedp.Navigate(f.base+"/holds"), chromedp.WaitVisible(chromedp.CSS(`#holds`)))
	forged := get(t, eve, "Eve forges an approval", chromedp.Evaluate[int](fmt.Sprintf(`(async () => {
			const csrf = document.querySelector('input[name=csrf]').value;
			const r = await fetch('/holds/%s/resolve', {method: 'POST', body: new URLSearchParams({csrf, outcome: 'approve'})});
			return r.status; })()`, hold), chromedp.EvalAwaitPromise))
	if forged != http.StatusNotFound && forged != http.StatusForbidden {
		t.Fatalf("Eve's forged approval answered %d", forged)
	}

	// A page on another site (localhost is not 127.0.0.1) auto-submits an
	// approval form to the console in Dana's browser: refused.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<form id="f" method="post" action="%s/holds/%s/resolve"><input name="outcome" value="approve"></form>
			<script>document.getElementById('f').submit()</script>`, f.base, hold)
	}))
	defer evil.Close()
	evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)
	do(t, ctx, "cross-site form", chromedp.Navigate(evilURL), chromedp.WaitVisible(chromedp.CSS(`section.failure`)))
	evilLanded := get(t, ctx, "where the cross-site form landed", chromedp.Text(chromedp.CSS(`section.failure`)))
	// SameSite=Strict: the browser did not even send the session cookie
	// (the Origin check and the CSRF token would refuse it next).
	if !strings.Contains(evilLanded, "not signed in") {
		t.Fatalf("cross-site form landed on: %q", evilLanded)
	}
	assertPending(t, f, hold)

	// A live re-render keeps what Dana is typing: the part changed (its
	// history emptied here), so it is replaced, and the reason survives.
	do(t, ctx, "type a reason",
		chromedp.Navigate(f.base+"/holds/"+hold),
		chromedp.WaitVisible(chromedp.CSS(`#approve`)),
		chromedp.Evaluate[chromedp.Void](`(() => { const i = document.querySelector('form.reject input[name=reason]'); i.focus(); i.value = 'half typed'; })()`))
	kept := get(t, ctx, "the reason after a re-render", chromedp.Evaluate[string](`(async () => {
			document.querySelector('ol.history').innerHTML = '';
			await window.clawguardRefresh();
			if (!document.querySelector('ol.history li')) return 'not re-rendered';
			const i = document.querySelector('form.reject input[name=reason]');
			return i === document.activeElement ? i.value : 'focus lost'; })()`, chromedp.EvalAwaitPromise))
	if kept != "half typed" {
		t.Fatalf("reason input after a live re-render: %q, want the typed text", kept)
	}

	// Dana approves from the hold page. The click is one step in the page
	// (a live re-render may replace the button between a lookup and a click).
	do(t, ctx, "approve",
		chromedp.WaitVisible(chromedp.CSS(`#approve`)),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('approve').click()`),
		chromedp.WaitVisible(chromedp.CSS(`#hold-status.approved`)))

	// The runner replays the send with the grant, as it does on approval;
	// the page shows the replay's ALLOW when it lands in the log.
	replay, err := f.runner.Guard.Decide(context.Background(), &guardv1.DecideRequest{Action: "a2a.send", Grant: hold,
		Resource: map[string]string{"to": "ops"}, Payload: mustStruct(t, map[string]any{"to": "ops", "text": "deploy notes ready"})})
	if err != nil || replay.GetDecision().GetEffect() != guardv1.Effect_EFFECT_ALLOW {
		t.Fatalf("replay: %v %v", replay, err)
	}
	do(t, ctx, "the replay's ALLOW arrives", chromedp.WaitVisible(chromedp.CSS(`tr.decision.allow`)),
		chromedp.ScrollIntoView(chromedp.CSS(`tr.decision.allow`)))
	screenshot(t, ctx, "approved")

	// Why the hold was made: the decision's page, in words.
	do(t, ctx, "why", chromedp.Navigate(f.base+"/decisions/"+held.GetDecisionId()), chromedp.WaitVisible(chromedp.CSS(`.why .summary`)))
	why := get(t, ctx, "why summary", chromedp.Text(chromedp.CSS(`.why .summary`)))
	// By name, as Dana reads them (ops: what research's destination calls it).
	if why != "held because the message policy Research lab → ops names Dana; no policy → allow" {
		t.Fatalf("why: %q", why)
	}
	screenshot(t, ctx, "why")

	do(t, ctx, "what if",
		chromedp.Navigate(f.base+"/whatif"),
		chromedp.WaitVisible(chromedp.CSS(`form.whatif`)),
		chromedp.SetValue(chromedp.CSS(`input[name="actor"]`), "agent:Research lab"),
		chromedp.SetValue(chromedp.CSS(`textarea[name="resource"]`), "to=ops"),
		chromedp.Submit(chromedp.CSS(`form.whatif`)),
		chromedp.WaitVisible(chromedp.CSS(`section.answer .why`)),
		chromedp.ScrollIntoView(chromedp.CSS(`section.answer .why`)))
	screenshot(t, ctx, "whatif")
}

func assertPending(t *testing.T, f *fixture, hold string) {
	t.Helper()
	var st string
	if err := f.srv.Pool.QueryRow(context.Background(), `SELECT status FROM holds WHERE id = $1`, hold).Scan(&st); err != nil || st != "pending" {
		t.Fatalf("hold %s is %q (%v), want still pending", hold, st, err)
	}
}
