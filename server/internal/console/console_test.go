package console_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/clawguard/clawguard/migrations/pgtest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/authn"
	"github.com/clawguard/clawguard/server/internal/config"
	"github.com/clawguard/clawguard/server/internal/console"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// fixture: groups research and ops; Dana is research's admin and the
// approver the message policy research → ops names; Eve administers ops;
// Olga is an owner. A runner hosts research's session s1.
type fixture struct {
	srv             *testserver.Server
	base            string
	dana, eve, olga string // user tokens
	runner          testserver.Clients
}

func start(t *testing.T) *fixture {
	t.Helper()
	return startWith(t, nil)
}

// startWith is start with the server's log written to logW (nil: not kept)
// and more config.
func startWith(t *testing.T, logW io.Writer, opts ...testserver.Option) *fixture {
	t.Helper()
	opts = append([]testserver.Option{func(c *config.Config) { c.ConsoleListen = "127.0.0.1:0" }}, opts...)
	var srv *testserver.Server
	if logW != nil {
		srv = testserver.StartLogged(t, logW, opts...)
	} else {
		srv = testserver.Start(t, opts...)
	}
	f := &fixture{srv: srv, base: "http://" + srv.ConsoleAddr()}
	for _, q := range []string{
		`INSERT INTO agent_groups (id, name) VALUES ('research', 'research'), ('ops', 'ops')`,
		`INSERT INTO runners (id, host, lease_expires_at) VALUES ('r1', 'h', now() + interval '1 hour')`,
		`INSERT INTO sessions (id, agent_group_id, runner_id) VALUES ('s1', 'research', 'r1')`,
		`INSERT INTO users (id) VALUES ('telegram:dana'), ('telegram:eve'), ('telegram:olga')`,
		`INSERT INTO user_roles (user_id, role, agent_group_id) VALUES ('telegram:dana', 'admin', 'research'), ('telegram:eve', 'admin', 'ops')`,
		`INSERT INTO user_roles (user_id, role) VALUES ('telegram:olga', 'owner')`,
		`INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) VALUES ('research', 'ops', 'ops')`,
		`INSERT INTO agent_message_policies (from_agent_group_id, to_agent_group_id, approver_user_id) VALUES ('research', 'ops', 'telegram:dana')`,
	} {
		if _, err := srv.Pool.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	f.dana = srv.Token(t, "user", "", "telegram:dana")
	f.eve = srv.Token(t, "user", "", "telegram:eve")
	f.olga = srv.Token(t, "user", "", "telegram:olga")
	f.runner = testserver.ClientsFor(srv.Conn(t, srv.Token(t, "runner", "r1", ""), "s1"))
	return f
}

// ask is the agent in research messaging ops, as its runner asks the guard:
// held for Dana alone, the hold created with the card.
func (f *fixture) ask(t *testing.T, text string) *guardv1.DecideResponse {
	t.Helper()
	resp, err := f.runner.Guard.Decide(context.Background(), &guardv1.DecideRequest{Action: "a2a.send",
		Resource: map[string]string{"to": "ops"}, Payload: mustStruct(t, map[string]any{"to": "ops", "text": text}),
		Card: &guardv1.HoldCard{Title: "research → ops: " + text, Question: "May research message ops?", DeliveryAction: "send_message"}})
	if err != nil || resp.GetHoldId() == "" {
		t.Fatalf("ask: %v %v", resp, err)
	}
	return resp
}

// browser is a cookie-keeping client that does not follow redirects.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newBrowser(t *testing.T, base string) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: base, c: &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) get(path string) (*http.Response, string) {
	b.t.Helper()
	resp, err := b.c.Get(b.base + path)
	if err != nil {
		b.t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

func (b *browser) post(path string, form url.Values, header ...string) (*http.Response, string) {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t *testing.T, body string) string {
	t.Helper()
	m := csrfRe.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no CSRF field in page:\n%s", body)
	}
	return m[1]
}

// signIn signs in with token and returns the session's CSRF token.
func (b *browser) signIn(token string) string {
	b.t.Helper()
	_, page := b.get("/signin")
	resp, body := b.post("/signin", url.Values{"csrf": {csrfOf(b.t, page)}, "token": {token}, "next": {"/holds"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/holds" {
		b.t.Fatalf("sign-in: %d %s", resp.StatusCode, body)
	}
	_, holds := b.get("/holds")
	return csrfOf(b.t, holds)
}

func cookieNamed(resp *http.Response, name string) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// The console adds no authority: a hold shows (with its buttons) only to
// who may resolve it, a forged click by anyone else is refused and leaves it
// pending, and what-if stays inside read scoping.
func TestHoldsFollowMayResolve(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	held := f.ask(t, "hello ops")
	hold := held.GetHoldId()

	dana := newBrowser(t, f.base)
	danaCSRF := dana.signIn(f.dana)
	_, list := dana.get("/holds")
	if !strings.Contains(list, hold) || !strings.Contains(list, "a2a_message_gate") {
		t.Fatalf("Dana's pending list lacks the hold:\n%s", list)
	}
	resp, page := dana.get("/holds/" + hold)
	for _, want := range []string{`id="approve"`, `id="reject"`, "only telegram:dana (nobody else, not even an owner)", `&#34;text&#34;: &#34;hello ops&#34;`, "requested"} {
		if resp.StatusCode != http.StatusOK || !strings.Contains(page, want) {
			t.Fatalf("Dana's hold page lacks %q (%d):\n%s", want, resp.StatusCode, page)
		}
	}

	// Eve (admin of ops) and Olga (an owner: exclusive means not even her)
	// may not resolve it: not listed, no page, no button, forged POST refused.
	for _, who := range []struct{ name, token string }{{"eve", f.eve}, {"olga", f.olga}} {
		b := newBrowser(t, f.base)
		csrf := b.signIn(who.token)
		if _, list := b.get("/holds"); strings.Contains(list, hold) {
			t.Errorf("%s sees the hold in the list", who.name)
		}
		resp, page := b.get("/holds/" + hold)
		if resp.StatusCode != http.StatusNotFound || strings.Contains(page, `id="approve"`) {
			t.Errorf("%s's hold page: %d (want 404, no button)", who.name, resp.StatusCode)
		}
		resp, _ = b.post("/holds/"+hold+"/resolve", url.Values{"csrf": {csrf}, "outcome": {"approve"}})
		if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s's forged approve: %d", who.name, resp.StatusCode)
		}
	}
	// Dana's click without her CSRF token does nothing either.
	if resp, _ := dana.post("/holds/"+hold+"/resolve", url.Values{"outcome": {"approve"}}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("approve without CSRF: %d", resp.StatusCode)
	}
	var st string
	_ = f.srv.Pool.QueryRow(ctx, `SELECT status FROM holds WHERE id = $1`, hold).Scan(&st)
	if st != "pending" {
		t.Fatalf("refused clicks changed the hold: %s", st)
	}

	// Dana rejects with a reason; the hold page shows who and why.
	resp, _ = dana.post("/holds/"+hold+"/resolve", url.Values{"csrf": {danaCSRF}, "outcome": {"reject"}, "reason": {"not during the freeze"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("reject: %d", resp.StatusCode)
	}
	_, page = dana.get("/holds/" + hold)
	if !strings.Contains(page, "not during the freeze") || strings.Contains(page, `id="approve"`) {
		t.Fatalf("rejected hold page:\n%s", page)
	}

	// Why: the decision's page says what ncl decisions get says.
	_, why := dana.get("/decisions/" + held.GetDecisionId())
	if !strings.Contains(why, "held because the message policy research → ops names telegram:dana; no policy → allow") ||
		!strings.Contains(why, "read: approver telegram:dana") {
		t.Fatalf("why page:\n%s", why)
	}
	// What-if: Dana may ask about research's agents; Eve may not.
	form := url.Values{"csrf": {danaCSRF}, "action": {"a2a.send"}, "actor": {"agent:research"}, "resource": {"to=ops"}}
	if resp, page := dana.post("/whatif", form); resp.StatusCode != http.StatusOK || !strings.Contains(page, "no message policy research → ops → allow") {
		t.Fatalf("Dana's what-if: %d\n%s", resp.StatusCode, page)
	}
	eve := newBrowser(t, f.base)
	form.Set("csrf", eve.signIn(f.eve))
	if resp, _ := eve.post("/whatif", form); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("Eve's what-if about research: %d", resp.StatusCode)
	}
	// Read-only pages are read scoped: Eve may not list runners.
	if _, page := eve.get("/runners"); !strings.Contains(page, "class=\"error\"") {
		t.Fatalf("Eve's runners page is not refused:\n%s", page)
	}
	if _, page := eve.get("/destinations"); strings.Contains(page, `data-label="GROUP">research<`) {
		t.Fatalf("Eve reads research's destinations:\n%s", page)
	}
	if resp, _ := eve.get("/destinations?group=research"); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("Eve's destinations of research: %d", resp.StatusCode)
	}
	if _, page := dana.get("/destinations"); !strings.Contains(page, `data-label="GROUP">research<`) {
		t.Fatalf("Dana does not see research's destination:\n%s", page)
	}
}

// The event stream is Approvals.Watch as the user: Dana's stream carries her
// hold's request, Eve's does not.
func TestEventsAreTheUsersWatch(t *testing.T) {
	f := start(t)
	stream := func(token string) *bufio.Reader {
		b := newBrowser(t, f.base)
		b.signIn(token)
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.base+"/events", nil)
		b.c.Timeout = 0
		resp, err := b.c.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("/events: %v %v", resp, err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		r := bufio.NewReader(resp.Body)
		if line, _ := r.ReadString('\n'); line != ": connected\n" {
			t.Fatalf("first line %q", line)
		}
		return r
	}
	danaEvents, eveEvents := stream(f.dana), stream(f.eve)
	hold := f.ask(t, "live?").GetHoldId()
	got := make(chan string, 1)
	go func() {
		for {
			line, err := danaEvents.ReadString('\n')
			if err != nil {
				return
			}
			if strings.HasPrefix(line, "data: ") {
				got <- line
				return
			}
		}
	}()
	select {
	case line := <-got:
		if !strings.Contains(line, `"hold":"`+hold+`"`) || !strings.Contains(line, `"type":"requested"`) {
			t.Fatalf("Dana's event: %s", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event reached Dana's stream")
	}
	// Eve's stream: a second hold for Dana, then one Eve may resolve (an
	// ops agent's create_agent, held for ops' admins); she sees only hers.
	f.ask(t, "second")
	if _, err := f.srv.Pool.Exec(context.Background(), `INSERT INTO sessions (id, agent_group_id, runner_id) VALUES ('s2', 'ops', 'r1')`); err != nil {
		t.Fatal(err)
	}
	opsRunner := testserver.ClientsFor(f.srv.Conn(t, f.srv.Token(t, "runner", "r1", ""), "s2"))
	mine, err := opsRunner.Guard.Decide(context.Background(), &guardv1.DecideRequest{Action: "agents.create",
		Payload: mustStruct(t, map[string]any{"name": "helper"}), Card: &guardv1.HoldCard{Title: "ops wants a helper"}})
	if err != nil || mine.GetHoldId() == "" {
		t.Fatalf("ops create_agent: %v %v", mine, err)
	}
	for {
		line, err := eveEvents.ReadString('\n')
		if err != nil {
			t.Fatalf("Eve's stream ended: %v", err)
		}
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		if !strings.Contains(line, mine.GetHoldId()) {
			t.Fatalf("Eve's stream carried a hold she may not resolve: %s", line)
		}
		break
	}
}

// Refusals are logged at info: who, what, why (SPEC: every refusal is logged).
func TestRefusalsAreLogged(t *testing.T) {
	srv := testserver.Start(t)
	var buf bytes.Buffer
	c := console.New(console.Deps{Pool: srv.Pool, Auth: authn.NewAuthenticator(srv.Pool),
		Log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	rec := httptest.NewRecorder()
	c.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/holds/hold_x/resolve", strings.NewReader("outcome=approve")))
	if rec.Code != http.StatusForbidden || !strings.Contains(buf.String(), "console refused") || !strings.Contains(buf.String(), "/holds/hold_x/resolve") {
		t.Fatalf("forged POST: %d, log %q", rec.Code, buf.String())
	}
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
