package console_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// Issue 46: the "why" page reads by name for a reader who may see the
// names, and in what that reader's group calls the others for one who may
// not; its fact lines say what they mean; it links to a hold only when the
// reader may open it.
func TestWhyReadsByNameForWhoMaySeeThem(t *testing.T) {
	f := start(t)
	named(t, f)
	asked := f.ask(t, "hello ops")
	why := "/decisions/" + asked.GetDecisionId()
	hold := asked.GetHoldId()

	olga := newBrowser(t, f.base)
	olga.signIn(f.olga)
	resp, page := olga.get(why)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("Olga's why page: %d\n%s", resp.StatusCode, page)
	}
	text := html.UnescapeString(page)
	mustContain(t, "the owner's why page", text,
		`Why <code>a2a.send</code> was <span class="badge hold">held</span>`,
		"held because the message policy Research lab → Ops team names Dana; no policy → allow",
		"the destination Research lab → Ops team exists", "read: a destination exists", "read: approver Dana",
		"a2a message policy Research lab → Ops team holds for Dana",
		"its page shows only to who may resolve it")
	// No empty fact lines, no raw fact names, and no link to a hold the
	// owner may not open (the policy names Dana alone).
	mustNotContain(t, "the owner's why page", text, "policy_also", "policy_approvals", "read policy_", `href="/holds/`+hold+`"`,
		"was hold<", "telegram:dana;")

	dana := newBrowser(t, f.base)
	dana.signIn(f.dana)
	_, page = dana.get(why)
	text = html.UnescapeString(page)
	// Dana reads research, not ops: ops is what research's destination calls it.
	mustContain(t, "Dana's why page", text, "held because the message policy Research lab → ops names Dana", `href="/holds/`+hold+`"`)
	if resp, _ := dana.get("/holds/" + hold); resp.StatusCode != http.StatusOK {
		t.Fatalf("Dana follows the why page's hold link: %d", resp.StatusCode)
	}
}

// Issue 46: an agent's own words are shown byte for byte, also when they
// hold a group's id or a user's id — never put in names.
func TestAgentTextIsShownVerbatim(t *testing.T) {
	f := start(t)
	named(t, f)
	text := "tell ops (research) and telegram:olga: ship it"
	hold := f.ask(t, text).GetHoldId()
	dana := newBrowser(t, f.base)
	dana.signIn(f.dana)
	_, page := dana.get("/holds/" + hold)
	payload := regexp.MustCompile(`(?s)<pre class="payload">(.*?)</pre>`).FindStringSubmatch(page)
	if payload == nil || !strings.Contains(html.UnescapeString(payload[1]), `"text": "`+text+`"`) {
		t.Fatalf("the payload is not the agent's text verbatim:\n%s", page)
	}
	asks := regexp.MustCompile(`(?s)<p class="asks" id="asks">(.*?)</p>`).FindStringSubmatch(page)
	if asks == nil || !strings.Contains(html.UnescapeString(asks[1]), text) {
		t.Fatalf("what is asked does not quote the agent verbatim: %v", asks)
	}
	_, list := dana.get("/holds")
	mustContain(t, "the pending list", html.UnescapeString(list), "to ops: "+text)
}

// Issue 46: no dead ends. As an owner, a group admin of each group and a
// member, every link on every page reachable from the pending list leads
// to a page that answers (no 403, 404 or 5xx); the hold approved for 8
// hours links to its standing grant, and the owner sees and revokes it.
func TestEveryLinkLeadsSomewhere(t *testing.T) {
	f := start(t)
	named(t, f)
	ctx := context.Background()
	if _, err := f.srv.Pool.Exec(ctx, `INSERT INTO users (id, display_name) VALUES ('telegram:mia', 'Mia');
		INSERT INTO agent_group_members (agent_group_id, user_id) VALUES ('research', 'telegram:mia')`); err != nil {
		t.Fatal(err)
	}
	mia := f.srv.Token(t, "user", "", "telegram:mia")

	approved := f.ask(t, "deploy at noon").GetHoldId()
	rejected := f.ask(t, "deploy at midnight").GetHoldId()
	f.ask(t, "still pending")
	dana := newBrowser(t, f.base)
	csrf := dana.signIn(f.dana)
	if resp, _ := dana.post("/holds/"+approved+"/resolve", url.Values{"csrf": {csrf}, "outcome": {"approve"}, "standing": {"8h"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve for 8h: %d", resp.StatusCode)
	}
	if resp, _ := dana.post("/holds/"+rejected+"/resolve", url.Values{"csrf": {csrf}, "outcome": {"reject"}, "reason": {"not at midnight"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("reject: %d", resp.StatusCode)
	}

	// The approved hold: under Resolved, linked to its standing grant.
	_, page := dana.get("/holds/" + approved)
	mustContain(t, "the approved hold", page, `<a href="/holds/resolved">Resolved holds</a>`, `id="standing-grant"`)
	grant := regexp.MustCompile(`href="/grants#([^"]+)"`).FindStringSubmatch(page)
	if grant == nil {
		t.Fatalf("the approved hold does not link its standing grant:\n%s", page)
	}
	_, resolved := dana.get("/holds/resolved?outcome=approved&who=Dana&since=1h")
	mustContain(t, "Dana's resolved list", resolved, approved)
	mustNotContain(t, "Dana's resolved list (approved only)", resolved, rejected)

	// The owner may not resolve Dana's holds, yet sees and revokes the grant.
	olga := newBrowser(t, f.base)
	olgaCSRF := olga.signIn(f.olga)
	_, grants := olga.get("/grants")
	mustContain(t, "the owner's grants page", grants, `id="`+grant[1]+`"`)
	if resp, _ := olga.post("/grants/revoke", url.Values{"csrf": {olgaCSRF}, "id": {grant[1]}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the owner revokes Dana's grant: %d", resp.StatusCode)
	}
	_, grants = olga.get("/grants?ended=1")
	mustContain(t, "the ended grants", grants, "revoked by Olga (telegram:olga)")

	eve := newBrowser(t, f.base)
	eve.signIn(f.eve)
	member := newBrowser(t, f.base)
	member.signIn(mia)
	for _, who := range []struct {
		name string
		b    *browser
	}{{"the owner", olga}, {"research's admin", dana}, {"ops's admin", eve}, {"a member", member}} {
		crawl(t, who.name, who.b)
	}
}

// crawl follows every console link from the pending list, breadth first,
// and fails on any page that does not answer 200.
func crawl(t *testing.T, who string, b *browser) {
	t.Helper()
	href := regexp.MustCompile(`href="(/[^"#]*)`)
	seen := map[string]bool{"/holds": true}
	queue := []string{"/holds"}
	for len(queue) > 0 && len(seen) < 80 {
		path := queue[0]
		queue = queue[1:]
		resp, page := b.get(path)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %s answers %d:\n%s", who, path, resp.StatusCode, page)
			continue
		}
		for _, m := range href.FindAllStringSubmatch(page, -1) {
			next := html.UnescapeString(m[1])
			if strings.HasPrefix(next, "/static/") || seen[next] {
				continue
			}
			seen[next] = true
			queue = append(queue, next)
		}
	}
	if len(seen) < 12 {
		t.Errorf("%s reached only %d pages: %v", who, len(seen), seen)
	}
}

// Issue 46: a refusal in the console names the way forward: the command
// that makes a user token, and the person (by name) an exclusive hold
// waits for.
func TestConsoleRefusalsSayWhatToType(t *testing.T) {
	f := start(t)
	named(t, f)
	hold := f.ask(t, "hello ops").GetHoldId()

	b := newBrowser(t, f.base)
	_, page := b.get("/signin")
	_, body := b.post("/signin", url.Values{"csrf": {csrfOf(t, page)}, "token": {f.srv.Token(t, "operator", "", "")}, "next": {"/holds"}})
	mustContain(t, "sign-in with an operator token", html.UnescapeString(body),
		"this is an operator token", "ncl tokens create --kind user --name <name> --user <channel>:<handle>")

	olga := newBrowser(t, f.base)
	csrf := olga.signIn(f.olga)
	resp, body := olga.post("/holds/"+hold+"/resolve", url.Values{"csrf": {csrf}, "outcome": {"approve"}})
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("the owner's approve of Dana's hold: %d", resp.StatusCode)
	}
	mustContain(t, "the owner's refused approve", html.UnescapeString(body),
		"its message policy names Dana alone", "ask Dana, or change the policy with ncl policies set --from 'Research lab' --to 'Ops team' --approver <user>")
}
