package console_test

import (
	"context"
	"html"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// named gives the fixture's groups and users names that are not their ids
// (research → "Research lab", ops → "Ops team", Dana, Eve, Olga), as groups
// made by ncl have.
func named(t *testing.T, f *fixture) {
	t.Helper()
	for _, q := range []string{
		`UPDATE agent_groups SET name = 'Research lab' WHERE id = 'research'`,
		`UPDATE agent_groups SET name = 'Ops team' WHERE id = 'ops'`,
		`UPDATE users SET display_name = initcap(split_part(id, ':', 2))`,
	} {
		if _, err := f.srv.Pool.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func mustContain(t *testing.T, what, page string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(page, w) {
			t.Fatalf("%s lacks %q:\n%s", what, w, page)
		}
	}
}

func mustNotContain(t *testing.T, what, page string, nots ...string) {
	t.Helper()
	for _, w := range nots {
		if strings.Contains(page, w) {
			t.Fatalf("%s has %q:\n%s", what, w, page)
		}
	}
}

// Issue 32: names where a person reads (the id one step away), a pending
// list that says what is asked, who asks and where the quorum stands, the
// Policies page with every approver, quorum and mode, a resolved hold that
// says what happened, and a second click that says it was one.
func TestPagesSayWhatIsAskedByName(t *testing.T) {
	f := start(t)
	named(t, f)
	ctx := context.Background()
	if _, err := f.srv.Pool.Exec(ctx, `UPDATE agent_message_policies SET also_approvers = ARRAY['telegram:eve'], approvals = 2, mode = 'enforce'`); err != nil {
		t.Fatal(err)
	}
	hold := f.ask(t, "hello ops").GetHoldId()
	dana := newBrowser(t, f.base)
	csrf := dana.signIn(f.dana)

	_, list := dana.get("/holds")
	// Dana reads research, not ops: ops is what research's destination
	// calls it.
	mustContain(t, "Dana's pending list", list, hold, "to ops: hello ops", `title="research">Research lab</span>`,
		"agent of Research lab", "0 of 2", `data-label="APPROVALS"`)

	_, page := dana.get("/holds/" + hold)
	mustContain(t, "the hold page", page, `title="research">Research lab</span> <code class="id sub">research</code>`,
		"an agent of group Research lab (research) (session s1)", "only Dana (telegram:dana), telegram:eve (nobody else, not even an owner)", // Dana reads only her own name
		"to=ops", "The exact payload that will run", "Expires", `id="asks"`)

	// Dana approves; her second click (a stale page, a double submit) says so.
	if resp, _ := dana.post("/holds/"+hold+"/resolve", url.Values{"csrf": {csrf}, "outcome": {"approve"}}); resp.StatusCode != 303 || resp.Header.Get("Location") != "/holds/"+hold {
		t.Fatalf("Dana's approval: %d → %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, _ := dana.post("/holds/"+hold+"/resolve", url.Values{"csrf": {csrf}, "outcome": {"approve"}})
	if resp.StatusCode != 303 || resp.Header.Get("Location") != "/holds/"+hold+"?said=already" {
		t.Fatalf("Dana's second click: %d → %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	_, page = dana.get(resp.Header.Get("Location"))
	mustContain(t, "the page after the second click", page, "Already approved; 1 of 2 — waiting for the other approvals.",
		"1 of 2 approvals — Dana (telegram:dana)")
	_, list = dana.get("/holds")
	mustContain(t, "Dana's list after her approval", list, "1 of 2 — you approved")
	// The notice is this user's: another's page with ?said= says nothing.
	eve := newBrowser(t, f.base)
	eveCSRF := eve.signIn(f.eve)
	_, page = eve.get("/holds/" + hold + "?said=already")
	mustNotContain(t, "Eve's page", page, "Already approved")

	// Eve completes the quorum; the page now says what happened, not what
	// will run or when it expires.
	if resp, _ := eve.post("/holds/"+hold+"/resolve", url.Values{"csrf": {eveCSRF}, "outcome": {"approve"}}); resp.StatusCode != 303 {
		t.Fatalf("Eve's approval: %d", resp.StatusCode)
	}
	_, page = dana.get("/holds/" + hold)
	mustContain(t, "the approved hold", page, "Approved by telegram:eve", "The payload that was approved")
	mustNotContain(t, "the approved hold", page, "The exact payload that will run", "Expires", "Eligible now")
	// A click on the resolved hold by one who approved it: already approved.
	resp, _ = dana.post("/holds/"+hold+"/resolve", url.Values{"csrf": {csrf}, "outcome": {"approve"}})
	if resp.StatusCode != 303 || resp.Header.Get("Location") != "/holds/"+hold+"?said=already" {
		t.Fatalf("Dana's click on the approved hold: %d → %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	_, page = dana.get(resp.Header.Get("Location"))
	mustContain(t, "the approved hold after a click", page, "Already approved; 2 of 2")

	// A rejected hold: who, why, and that nothing ran.
	if _, err := f.srv.Pool.Exec(ctx, `UPDATE agent_message_policies SET also_approvers = '{}', approvals = 0`); err != nil {
		t.Fatal(err)
	}
	second := f.ask(t, "second thoughts").GetHoldId()
	if resp, _ := dana.post("/holds/"+second+"/resolve", url.Values{"csrf": {csrf}, "outcome": {"reject"}, "reason": {"not now"}}); resp.StatusCode != 303 {
		t.Fatalf("reject: %d", resp.StatusCode)
	}
	_, page = dana.get("/holds/" + second)
	mustContain(t, "the rejected hold", page, "Rejected by Dana (telegram:dana)", "“not now”. Nothing ran.", "The payload that was rejected (it did not run)")
	mustNotContain(t, "the rejected hold", page, "The exact payload that will run", "Expires in")

	// Policies: every approver, the quorum and the mode, in words.
	if _, err := f.srv.Pool.Exec(ctx, `UPDATE agent_message_policies SET also_approvers = ARRAY['telegram:eve', 'telegram:olga'], approvals = 2, mode = 'audit'`); err != nil {
		t.Fatal(err)
	}
	olga := newBrowser(t, f.base)
	olga.signIn(f.olga)
	_, pol := olga.get("/policies")
	mustContain(t, "the Policies page", pol, "Dana (telegram:dana), Eve (telegram:eve), Olga (telegram:olga)", "2 of 3", "audit",
		"messages Research lab → Ops team run; the decision log records that they would be held until 2 of Dana, Eve, Olga approve (audit)",
		`data-label="FROM">Research lab<div class="sub"><code class="id">research</code></div>`)

	// Decisions: the actor by its group's name, the id as its title.
	_, page = eve.get("/holds/" + hold)
	mustContain(t, "Eve's view of the hold (she reads ops)", page, "to=ops (Ops team)", "Approved by Eve (telegram:eve)")
	_, dec := dana.get("/decisions?action=a2a.send")
	mustContain(t, "the Decisions page", dec, `title="agent:research:s1">agent:Research lab:s1</span>`)
}

// Issue 32: What-if's "the same answer" is an ncl command with every field
// that changes the answer (it dropped --resource, and running it answered
// deny where the page said hold). The test runs the printed command, with
// ncl built from this tree, against the same server as the same user.
func TestWhatIfCommandGivesTheSameAnswer(t *testing.T) {
	f := start(t)
	named(t, f)
	ncl := buildNcl(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "dana.token")
	if err := os.WriteFile(tokenFile, []byte(f.dana+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := f.srv.Pool.Exec(context.Background(), `INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) VALUES ('research', 'the ops', 'ops')`); err != nil {
		t.Fatal(err)
	}
	dana := newBrowser(t, f.base)
	csrf := dana.signIn(f.dana)
	sameAnswer := regexp.MustCompile(`id="same-answer">([^<]*)<`)
	effectRe := regexp.MustCompile(`id="answer-effect">([^<]*)<`)
	reasonRe := regexp.MustCompile(`id="answer-reason">([^<]*)<`)
	olga := newBrowser(t, f.base)
	olgaCSRF := olga.signIn(f.olga)
	olgaToken := filepath.Join(dir, "olga.token")
	if err := os.WriteFile(olgaToken, []byte(f.olga+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		owner                                  bool // Olga, an owner, reads every group's name; Dana only research's
		actor, resource, payload, action, want string
	}{
		{false, "agent:research", "to=ops", "", "a2a.send", "hold"},         // the ids
		{false, "agent:Research lab", "to=the ops", "", "a2a.send", "hold"}, // a destination's name
		{true, "agent:Research lab", "to=Ops team", "", "a2a.send", "hold"}, // the names
		{false, "agent:research", "to=research", "", "a2a.send", "allow"},   // a self-send
		{false, "agent:research:s1", "to=ops\nextra=1", `{"text": "it's ok"}`, "a2a.send", "hold"},
		{false, "agent:research", "", `{"name": "helper's"}`, "agents.create", "hold"}, // a payload with a quote
		{true, "agent:Ops team", "to=Research lab", "", "a2a.send", "deny"},            // no destination
	} {
		b, csrf, tokenFile := dana, csrf, tokenFile
		if c.owner {
			b, csrf, tokenFile = olga, olgaCSRF, olgaToken
		}
		form := url.Values{"csrf": {csrf}, "action": {c.action}, "actor": {c.actor}, "resource": {c.resource}, "payload": {c.payload}}
		resp, page := b.post("/whatif", form)
		cmd, effect, reason := sameAnswer.FindStringSubmatch(page), effectRe.FindStringSubmatch(page), reasonRe.FindStringSubmatch(page)
		if resp.StatusCode != 200 || cmd == nil || effect == nil || reason == nil {
			t.Fatalf("what-if %+v: %d\n%s", c, resp.StatusCode, page)
		}
		if effect[1] != c.want {
			t.Errorf("what-if %+v answered %s, want %s", c, effect[1], c.want)
		}
		line := html.UnescapeString(cmd[1])
		words, err := shellWords(line)
		if err != nil || len(words) < 2 || words[0] != "ncl" || words[1] != "explain" {
			t.Fatalf("the same answer is %q (%v)", line, err)
		}
		// The table: ncl names groups and users for this reader as the page does.
		run := exec.Command(ncl, words[1:]...)
		run.Env = []string{"CLAWGUARD_SERVER=" + f.srv.Addr(), "CLAWGUARD_TOKEN_FILE=" + tokenFile, "HOME=" + dir}
		out, err := run.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
		var got struct{ Effect, Reason string }
		for _, l := range strings.Split(string(out), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && (k == "EFFECT" || k == "REASON") {
				*map[string]*string{"EFFECT": &got.Effect, "REASON": &got.Reason}[k] = strings.TrimSpace(v)
			}
		}
		if got.Effect != effect[1] || got.Reason != html.UnescapeString(reason[1]) {
			t.Errorf("%s answered %s %q; the page said %s %q", line, got.Effect, got.Reason, effect[1], html.UnescapeString(reason[1]))
		}
	}
}

var (
	nclOnce sync.Once
	nclBin  string
	nclErr  error
)

// buildNcl builds ncl from this tree once per test binary.
func buildNcl(t *testing.T) string {
	t.Helper()
	nclOnce.Do(func() {
		dir, err := os.MkdirTemp("", "console-ncl-")
		if err != nil {
			nclErr = err
			return
		}
		nclBin = filepath.Join(dir, "ncl")
		if out, err := exec.Command("go", "build", "-o", nclBin, "github.com/clawguard/clawguard/cli/cmd/ncl").CombinedOutput(); err != nil {
			nclErr = &buildError{out: string(out), err: err}
		}
	})
	if nclErr != nil {
		t.Fatal(nclErr)
	}
	return nclBin
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return "build ncl: " + e.err.Error() + "\n" + e.out }

// shellWords splits a command line as a POSIX shell does for plain words
// and single-quoted strings ('\” inside is a quote): what the console
// prints.
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	in, quoted := false, false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case quoted && ch == '\'':
			quoted = false
		case quoted:
			cur.WriteByte(ch)
		case ch == '\'':
			quoted, in = true, true
		case ch == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			in = true
		case ch == ' ':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(ch)
			in = true
		}
	}
	if quoted {
		return nil, &buildError{err: os.ErrInvalid, out: "unterminated quote in " + s}
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}
