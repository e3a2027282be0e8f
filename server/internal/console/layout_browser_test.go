package console_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// fitsJS lists what does not fit the viewport: the document scrolling
// sideways, any element wider than the viewport or reaching past either
// edge (content inside a box that scrolls itself, like the payload, is the
// box's own), and every link, button and field that cannot be reached — not
// within the viewport's width once scrolled to, or covered by something else.
const fitsJS = `(() => {
  const vw = document.documentElement.clientWidth, bad = [];
  const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
    (el.className && typeof el.className === 'string' ? '.' + el.className.trim().split(/\s+/).join('.') : '');
  const scrolls = el => { for (let p = el.parentElement; p; p = p.parentElement) {
    const o = getComputedStyle(p).overflowX; if (o === 'auto' || o === 'scroll') return true; } return false; };
  if (document.documentElement.scrollWidth > vw) bad.push('the page scrolls sideways: ' + document.documentElement.scrollWidth + ' > ' + vw);
  if (window.innerWidth !== vw && document.documentElement.scrollWidth > window.innerWidth) bad.push('wider than the window');
  for (const el of document.querySelectorAll('body *')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    if (scrolls(el)) continue;
    if (r.width > vw + 0.5 || r.left < -0.5 || r.right > vw + 0.5)
      bad.push(name(el) + ' spans ' + Math.round(r.left) + '..' + Math.round(r.right) + ' of ' + vw);
  }
  for (const el of document.querySelectorAll('a[href], button, input:not([type=hidden]), select, textarea')) {
    if (!el.getClientRects().length || getComputedStyle(el).visibility === 'hidden') continue;
    el.scrollIntoView({block: 'center', inline: 'nearest'});
    const r = el.getBoundingClientRect();
    if (r.left < -0.5 || r.right > vw + 0.5) { bad.push(name(el) + ' is off the side: ' + Math.round(r.left) + '..' + Math.round(r.right)); continue; }
    const x = Math.min(Math.max(r.left + r.width / 2, 0), vw - 1), y = Math.min(Math.max(r.top + r.height / 2, 0), window.innerHeight - 1);
    const hit = document.elementFromPoint(x, y);
    if (!hit || !(hit === el || el.contains(hit) || hit.contains(el) || (el.labels && [...el.labels].some(l => l.contains(hit)))))
      bad.push(name(el) + ' is covered by ' + (hit ? name(hit) : 'nothing'));
  }
  window.scrollTo(0, 0);
  return bad.slice(0, 20);
})()`

// readmeShots are the layout screenshots the README shows (the others go
// to a temporary directory).
var readmeShots = map[string]bool{"pending-phone": true}

// fits fails the test with what does not fit, and saves the screenshot.
func fits(t *testing.T, ctx context.Context, shot string) {
	t.Helper()
	bad := get(t, ctx, "measure "+shot, chromedp.Evaluate[[]string](fitsJS))
	dir := ""
	if readmeShots[shot] {
		dir = os.Getenv("CLAWGUARD_SCREENSHOT_DIR")
	}
	saveShot(t, shot, dir, get(t, ctx, "screenshot "+shot, chromedp.CaptureScreenshot()))
	if len(bad) > 0 {
		t.Errorf("%s does not fit:\n  %s", shot, strings.Join(bad, "\n  "))
	}
}

// Issue 32: the console on a phone (390 px, a mobile viewport) and a desk
// (1280 px): the pending list, a hold, Policies, What-if and Decisions have
// no horizontal overflow, no element wider than the viewport, and every
// link, button and field reachable — with the ids, payloads, reasons and
// names long enough to break a careless layout.
func TestBrowserPagesFitAPhoneAndADesk(t *testing.T) {
	exe := chromium(t)
	f := start(t)
	named(t, f)
	if _, err := f.srv.Pool.Exec(context.Background(),
		`UPDATE agent_message_policies SET also_approvers = ARRAY['telegram:eve', 'telegram:olga'], approvals = 2`); err != nil {
		t.Fatal(err)
	}
	long := "deploy notes ready: " + strings.Repeat("the-release-candidate-build-artifact-", 5) + "\nsecond line of the message"
	held := f.ask(t, long)
	hold := held.GetHoldId()
	f.ask(t, "hello ops")
	// The Policies page shows the mode too (set after the holds: warn lets sends run).
	if _, err := f.srv.Pool.Exec(context.Background(), `UPDATE agent_message_policies SET mode = 'warn'`); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		width, height int64
		phone         bool
		suffix        string
	}{{390, 844, true, "phone"}, {1280, 800, false, "desk"}} {
		t.Run(w.suffix, func(t *testing.T) {
			ctx := newTab(t, exe)
			opts := []chromedp.EmulateViewportOption{chromedp.EmulateScale(1)}
			if w.phone {
				opts = append(opts, chromedp.EmulateMobile)
			}
			do(t, ctx, "viewport", chromedp.EmulateViewport(w.width, w.height, opts...))
			signInBrowser(t, ctx, f.base, f.olga)
			if got := get(t, ctx, "viewport width", chromedp.Evaluate[int64](`document.documentElement.clientWidth`)); got != w.width {
				t.Fatalf("viewport is %d px wide, want %d", got, w.width)
			}
			do(t, ctx, "pending list", chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`tr[data-hold=%q]`, hold))))
			fits(t, ctx, "pending-"+w.suffix)

			do(t, ctx, "a hold", chromedp.Navigate(f.base+"/holds/"+hold), chromedp.WaitVisible(chromedp.CSS(`#hold pre.payload`)))
			fits(t, ctx, "hold-"+w.suffix)
			if w.phone {
				fullScreenshot(t, ctx, "hold-phone") // the README's
			}

			do(t, ctx, "policies", chromedp.Navigate(f.base+"/policies"), chromedp.WaitVisible(chromedp.CSS(`table.list`)))
			page := get(t, ctx, "policies text", chromedp.Text(chromedp.CSS(`main`)))
			for _, want := range []string{"Dana (telegram:dana), Eve (telegram:eve), Olga (telegram:olga)", "2 of 3", "warn"} {
				if !strings.Contains(page, want) {
					t.Errorf("Policies page lacks %q:\n%s", want, page)
				}
			}
			fits(t, ctx, "policies-"+w.suffix)

			do(t, ctx, "what if",
				chromedp.Navigate(f.base+"/whatif"),
				chromedp.WaitVisible(chromedp.CSS(`form.whatif`)),
				chromedp.SetValue(chromedp.CSS(`input[name="actor"]`), "agent:Research lab"),
				chromedp.SetValue(chromedp.CSS(`textarea[name="resource"]`), "to=Ops team"),
				chromedp.SetValue(chromedp.CSS(`textarea[name="payload"]`), `{"text": "`+strings.Repeat("a-long-message-", 12)+`"}`),
				chromedp.Submit(chromedp.CSS(`form.whatif`)),
				chromedp.WaitVisible(chromedp.CSS(`section.answer .why`)))
			if cmd := get(t, ctx, "the same answer", chromedp.Text(chromedp.CSS(`#same-answer`))); !strings.Contains(cmd, "--resource 'to=Ops team'") {
				t.Errorf("what-if's command: %q", cmd)
			}
			fits(t, ctx, "whatif-"+w.suffix)

			do(t, ctx, "decisions", chromedp.Navigate(f.base+"/decisions"), chromedp.WaitVisible(chromedp.CSS(`table.decisions tr.decision`)))
			fits(t, ctx, "decisions-"+w.suffix)

			// The why page of the hold's decision, by name for the owner.
			do(t, ctx, "why", chromedp.Navigate(f.base+"/decisions/"+held.GetDecisionId()), chromedp.WaitVisible(chromedp.CSS(`section.why`)))
			why := get(t, ctx, "why text", chromedp.Text(chromedp.CSS(`main`)))
			for _, want := range []string{"Why a2a.send was held", "the message policy Research lab → Ops team names Dana", "read: quorum 2"} {
				if !strings.Contains(why, want) {
					t.Errorf("the why page lacks %q:\n%s", want, why)
				}
			}
			fits(t, ctx, "why-"+w.suffix)

			do(t, ctx, "resolved", chromedp.Navigate(f.base+"/holds/resolved"), chromedp.WaitVisible(chromedp.CSS(`table.resolved`)))
			fits(t, ctx, "resolved-"+w.suffix)

			do(t, ctx, "freezes", chromedp.Navigate(f.base+"/freezes"), chromedp.WaitVisible(chromedp.CSS(`table.freezes`)))
			fits(t, ctx, "freezes-"+w.suffix)

			do(t, ctx, "grants", chromedp.Navigate(f.base+"/grants"), chromedp.WaitVisible(chromedp.CSS(`table.grants`)))
			fits(t, ctx, "grants-"+w.suffix)
		})
	}
}
