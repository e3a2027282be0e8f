package console_test

import (
	"net/http"
	"strings"
	"testing"
)

// Issue 32: the Decisions page shows what changed something or was refused;
// page views (every console page is a logged read) only with "reads too".
// Filters take a group or a user by name, and a name nobody carries is said
// so, never an empty log.
func TestDecisionsPageLeavesReadsOutAndFiltersByName(t *testing.T) {
	t.Parallel()
	f := start(t)
	held := f.ask(t, "hello ops")
	olga := newBrowser(t, f.base)
	olga.signIn(f.olga)
	for range 2 { // page views: each logs groups.list and friends
		if resp, _ := olga.get("/holds"); resp.StatusCode != http.StatusOK {
			t.Fatalf("/holds: %d", resp.StatusCode)
		}
	}
	resp, body := olga.get("/decisions")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, held.GetDecisionId()) {
		t.Fatalf("/decisions: %d, want the hold's decision listed", resp.StatusCode)
	}
	if strings.Contains(body, "groups.list") || strings.Contains(body, "decisions.list") {
		t.Error("the default view lists page views (groups.list / decisions.list)")
	}
	if !strings.Contains(body, "tick “reads too”") {
		t.Error("the default view does not say reads are left out")
	}
	_, body = olga.get("/decisions?reads=on")
	if !strings.Contains(body, "groups.list") {
		t.Error("with reads too, the page views are not listed")
	}
	// By name: research's hold is there, ops' log has none of it.
	if _, body = olga.get("/decisions?group=research"); !strings.Contains(body, held.GetDecisionId()) {
		t.Error("group=research (a name) does not list research's hold")
	}
	if _, body = olga.get("/decisions?group=ops"); strings.Contains(body, held.GetDecisionId()) {
		t.Error("group=ops lists research's hold")
	}
	if _, body = olga.get("/decisions?actor=telegram:olga&reads=on"); !strings.Contains(body, "groups.list") {
		t.Error("actor=telegram:olga with reads does not list olga's page views")
	}
	for query, want := range map[string]string{
		"group=nowhere": "no group you can read",
		"actor=nobody":  "no user is called",
		"since=soon":    "want a duration ago",
	} {
		resp, body := olga.get("/decisions?" + query)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, want) {
			t.Errorf("/decisions?%s: %d, want 400 saying %q", query, resp.StatusCode, want)
		}
	}
}
