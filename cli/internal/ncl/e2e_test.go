package ncl

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clawguard/clawguard/cli/internal/clitest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

func TestMain(m *testing.M) { os.Exit(clitest.Main(m)) }

// realServer is clawguard-server built from this tree, serving on loopback
// over a fresh Postgres database (clitest).
type realServer struct{ *clitest.Server }

func startRealServer(t *testing.T) *realServer { return &realServer{clitest.Start(t)} }

// env is the environment ncl sees: the server, its operator token, and a
// HOME without a config file.
func (s *realServer) env(extra ...string) func(string) string {
	m := map[string]string{"CLAWGUARD_SERVER": s.Addr, "CLAWGUARD_TOKEN_FILE": s.TokenFile, "HOME": s.Dir}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i]] = extra[i+1]
	}
	return func(k string) string { return m[k] }
}

type result struct {
	out, err string
	code     int
}

func (s *realServer) ncl(t *testing.T, args ...string) result {
	t.Helper()
	return runNcl(context.Background(), s.env(), args...)
}

// must runs ncl and fails the test on a non-zero exit.
func (s *realServer) must(t *testing.T, args ...string) string {
	t.Helper()
	r := s.ncl(t, args...)
	if r.code != 0 {
		t.Fatalf("ncl %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.out, r.err)
	}
	return r.out
}

func runNcl(ctx context.Context, getenv func(string) string, args ...string) result {
	var out, errb bytes.Buffer
	code := Run(ctx, args, &out, &errb, getenv)
	return result{out: out.String(), err: errb.String(), code: code}
}

func jsonObj(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, s)
	}
	return m
}

func jsonArr(t *testing.T, s string) []map[string]any {
	t.Helper()
	var a []map[string]any
	if err := json.Unmarshal([]byte(s), &a); err != nil {
		t.Fatalf("not a JSON array: %v\n%s", err, s)
	}
	return a
}

// TestEndToEnd drives ncl, in process, against the real server binary on a
// real Postgres: the operator walkthrough of the README.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the real server")
	}
	srv := startRealServer(t)

	// Groups: create (JSON object with its id; -q id only), list, get.
	research := jsonObj(t, srv.must(t, "groups", "create", "--name", "research", "--cli-scope", "group", "-o", "json"))
	a, _ := research["id"].(string)
	if a == "" || research["name"] != "research" {
		t.Fatalf("groups create -o json = %v", research)
	}
	if cfg, _ := research["config"].(map[string]any); cfg["cli_scope"] != "group" {
		t.Errorf("cli_scope = %v, want group", cfg["cli_scope"])
	}
	b := strings.TrimSpace(srv.must(t, "groups", "create", "--name", "ops", "--cli-scope", "group", "-q"))
	if b == "" || strings.Contains(b, "\n") || b == a {
		t.Fatalf("groups create -q = %q", b)
	}
	table := srv.must(t, "groups", "list")
	for _, want := range []string{"ID", "NAME", "CLI SCOPE", a, "research", b, "ops"} {
		if !strings.Contains(table, want) {
			t.Errorf("groups list lacks %q:\n%s", want, table)
		}
	}
	if got := jsonArr(t, srv.must(t, "groups", "list", "-o", "json")); len(got) != 2 {
		t.Errorf("groups list -o json: %d groups, want 2", len(got))
	}
	if out := srv.must(t, "groups", "get", a); !strings.Contains(out, "NAME:") || !strings.Contains(out, "research") {
		t.Errorf("groups get:\n%s", out)
	}
	if id := strings.TrimSpace(srv.must(t, "groups", "get", "research", "-q")); id != a {
		t.Errorf("groups get research -q = %q, want %q (lookup by name)", id, a)
	}
	if r := srv.ncl(t, "groups", "get", "ag_does_not_exist"); r.code != ExitServer || !strings.HasPrefix(r.err, "ncl: not found: ") {
		t.Errorf("groups get of a missing group: exit %d, stderr %q", r.code, r.err)
	}

	// Roles: an explicit group scope.
	srv.must(t, "users", "create", "telegram:alice", "--display-name", "Alice")
	srv.must(t, "users", "create", "--id", "telegram:dana", "--display-name", "Dana")
	srv.must(t, "roles", "grant", "--user", "telegram:alice", "--role", "admin", "--scope", "group", "--group", a)
	roles := jsonArr(t, srv.must(t, "roles", "list", "--group", a, "-o", "json"))
	if len(roles) != 1 || roles[0]["user_id"] != "telegram:alice" || roles[0]["role"] != "admin" || roles[0]["scope"] != "group" || roles[0]["group"] != a {
		t.Errorf("roles list = %v", roles)
	}

	// Destination and message policy A → B.
	srv.must(t, "destinations", "add", "--group", a, "--name", "b", "--target-group", b)
	srv.must(t, "policies", "set", "--from", a, "--to", b, "--approver", "telegram:dana")
	// Tables by name; -o wide adds the ids behind them.
	if out := srv.must(t, "destinations", "list", "--group", a); !strings.Contains(out, "group ops") || strings.Contains(out, b) {
		t.Errorf("destinations list:\n%s", out)
	}
	if out := srv.must(t, "destinations", "list", "--group", a, "-o", "wide"); !strings.Contains(out, b) || !strings.Contains(out, "group ops") {
		t.Errorf("destinations list -o wide:\n%s", out)
	}
	if out := srv.must(t, "policies", "list"); !strings.Contains(out, "Dana") || !strings.Contains(out, "research") {
		t.Errorf("policies list:\n%s", out)
	}
	if out := srv.must(t, "policies", "list", "-o", "wide"); !strings.Contains(out, "telegram:dana") || !strings.Contains(out, a) {
		t.Errorf("policies list -o wide:\n%s", out)
	}

	t.Run("catalog", func(t *testing.T) {
		if out := srv.must(t, "catalog", "list"); !strings.Contains(out, "a2a.send") || !strings.Contains(out, "ACTION") {
			t.Errorf("catalog list lacks a2a.send:\n%s", out)
		}
		if entries := jsonArr(t, srv.must(t, "catalog", "list", "-o", "json")); len(entries) == 0 {
			t.Error("catalog list -o json is empty")
		}
	})

	// Explain: the policy holds for dana only; the reverse has no destination.
	t.Run("explain", func(t *testing.T) {
		d := jsonObj(t, srv.must(t, "explain", "--action", "a2a.send", "--actor", "agent:"+a, "--resource", "to="+b, "-o", "json"))
		if d["effect"] != "hold" || d["approver_scope"] == "" {
			t.Errorf("explain A→B = %v, want hold", d)
		}
		if rule, _ := d["approver_rule"].(map[string]any); rule["exclusive"] == nil {
			t.Errorf("approver_rule = %v, want exclusive(telegram:dana)", d["approver_rule"])
		}
		out := srv.must(t, "explain", "--action", "a2a.send", "--actor", "agent:"+b, "--resource", "to="+a)
		if !strings.Contains(out, "EFFECT:") || !strings.Contains(out, "deny") {
			t.Errorf("explain B→A:\n%s", out)
		}
		// An action outside the catalog is a typo to point at, not a silent allow.
		r := srv.ncl(t, "explain", "--action", "a2a.sned", "--actor", "agent:"+a)
		if r.code != 2 || !strings.Contains(r.err, `unknown action "a2a.sned"`) || !strings.Contains(r.err, "a2a.send") || r.out != "" {
			t.Errorf("explain of an unknown action: exit %d\nstdout: %s\nstderr: %s", r.code, r.out, r.err)
		}
	})

	t.Run("version", func(t *testing.T) {
		out := srv.must(t, "version")
		if out != "client: "+Version+"\nserver: dev ("+srv.Addr+")\n" {
			t.Errorf("ncl version:\n%s", out)
		}
		v := jsonObj(t, srv.must(t, "version", "-o", "json"))
		if v["client"] != Version || v["server"] != "dev" {
			t.Errorf("ncl version -o json = %v", v)
		}
	})

	// Approvals: a hold appears on watch, is listed, approved as dana, and
	// its resolution is watched too.
	t.Run("approvals", func(t *testing.T) {
		if out := srv.must(t, "approvals", "list"); !strings.HasPrefix(out, "ID") {
			t.Errorf("approvals list on an empty system:\n%s", out)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		pr, pw := io.Pipe()
		watchDone := make(chan result, 1)
		go func() {
			var errb bytes.Buffer
			code := Run(ctx, []string{"approvals", "watch", "--after", "0"}, pw, &errb, srv.env())
			pw.Close()
			watchDone <- result{err: errb.String(), code: code}
		}()
		lines := bufio.NewScanner(pr)

		hold := requestHold(t, srv, a)
		if out := srv.must(t, "approvals", "list"); !strings.Contains(out, hold) {
			t.Errorf("approvals list lacks %s:\n%s", hold, out)
		}
		if got := jsonObj(t, srv.must(t, "approvals", "get", hold, "-o", "json")); got["id"] != hold || got["status"] != "pending" {
			t.Errorf("approvals get = %v", got)
		}
		waitLine(t, lines, "requested", hold)
		out := srv.must(t, "approvals", "approve", hold, "--as", "telegram:dana")
		if !strings.Contains(out, "approved hold "+hold) {
			t.Errorf("approve: %q", out)
		}
		waitLine(t, lines, "resolved", hold)
		// Dana's second click: her approval stands, and ncl says so.
		if r := srv.ncl(t, "approvals", "approve", hold, "--as", "telegram:dana"); r.code != 0 || !strings.Contains(r.out, "already approved; 1 of 1") {
			t.Errorf("Dana's second approve: exit %d (%s) %q, want 0 and \"already approved\"", r.code, r.err, r.out)
		}
		// Anyone else's click on the resolved hold is still refused.
		if r := srv.ncl(t, "approvals", "approve", hold, "--as", "telegram:alice"); r.code != ExitServer {
			t.Errorf("approve of a resolved hold by another: exit %d (%s), want %d", r.code, r.err, ExitServer)
		}
		cancel()
		if r := <-watchDone; r.code != 0 {
			t.Errorf("watch ended with %d: %s", r.code, r.err)
		}

		// Reject with a reason; someone else than the exclusive approver may not.
		hold2 := requestHold(t, srv, a)
		if r := srv.ncl(t, "approvals", "reject", hold2, "--as", "telegram:alice", "--reason", "no"); r.code != ExitServer || !strings.Contains(r.err, "permission denied") {
			t.Errorf("reject by a non-approver: exit %d, %q", r.code, r.err)
		}
		srv.must(t, "approvals", "reject", hold2, "--as", "telegram:dana", "--reason", "not during the freeze")
		if got := jsonObj(t, srv.must(t, "approvals", "get", hold2, "-o", "json")); got["status"] != "rejected" || got["reason"] != "not during the freeze" {
			t.Errorf("rejected hold = %v", got)
		}
	})

	// Standing grants (issue 32): a hold no decision made (a credential
	// request) is approved once only, and ncl says why; grants list and
	// revoke reach the server.
	t.Run("standing grants", func(t *testing.T) {
		hold := requestHold(t, srv, a)
		r := srv.ncl(t, "approvals", "approve", hold, "--for", "1h", "--as", "telegram:dana")
		if r.code != ExitServer || !strings.Contains(r.err, "cannot be approved as a standing grant") || !strings.Contains(r.err, "approve it once") {
			t.Errorf("approve a credential request for 1h: exit %d\n%s", r.code, r.err)
		}
		if out := srv.must(t, "approvals", "approve", hold, "--as", "telegram:dana"); !strings.Contains(out, "approved hold "+hold) || strings.Contains(out, "standing") {
			t.Errorf("approve it once: %q", out)
		}
		if out := srv.must(t, "grants", "list", "--all"); !strings.HasPrefix(out, "ID") || strings.Contains(out, "sg_") {
			t.Errorf("grants list with none:\n%s", out)
		}
		if r := srv.ncl(t, "grants", "revoke", "sg_nope"); r.code != ExitServer || !strings.Contains(r.err, "not found") {
			t.Errorf("grants revoke of an unknown grant: exit %d %s", r.code, r.err)
		}
	})

	t.Run("token bindings", func(t *testing.T) {
		// What a runner or bridge speaks for is set on its token.
		rt := jsonObj(t, srv.must(t, "tokens", "create", "--kind", "runner", "--name", "r9", "--runner", "r9",
			"--host", "host-9", "--label", "gpu=true", "--label", "zone=eu", "--secret-file", filepath.Join(t.TempDir(), "r9"), "-o", "json"))
		if labels, _ := rt["labels"].(map[string]any); rt["host"] != "host-9" || labels["gpu"] != "true" || labels["zone"] != "eu" {
			t.Errorf("runner token = %v, want host-9 gpu=true zone=eu", rt)
		}
		bt := jsonObj(t, srv.must(t, "tokens", "create", "--kind", "bridge", "--name", "tg", "--channel", "telegram", "--channel", "slack",
			"--secret-file", filepath.Join(t.TempDir(), "tg"), "-o", "json"))
		if ch, _ := bt["channels"].([]any); len(ch) != 2 || ch[0] != "telegram" || ch[1] != "slack" {
			t.Errorf("bridge token = %v, want channels telegram, slack", bt)
		}
		for name, args := range map[string][]string{
			"a host on a bridge token": {"--kind", "bridge", "--name", "b", "--channel", "telegram", "--host", "h"},
			"a channel on a runner":    {"--kind", "runner", "--name", "r", "--runner", "r", "--channel", "telegram"},
			"a bad channel namespace":  {"--kind", "bridge", "--name", "b", "--channel", "Tele gram"},
		} {
			r := srv.ncl(t, append([]string{"tokens", "create", "--secret-only"}, args...)...)
			if r.code != ExitServer || !strings.Contains(r.err, "invalid argument") {
				t.Errorf("%s: exit %d %q, want an invalid argument", name, r.code, r.err)
			}
		}
	})

	t.Run("token expiry", func(t *testing.T) {
		tk := jsonObj(t, srv.must(t, "tokens", "create", "--kind", "user", "--name", "erin-90d", "--user", "telegram:dana",
			"--expires-in", "90d", "--secret-file", filepath.Join(t.TempDir(), "erin"), "-o", "json"))
		created, err1 := time.Parse(time.RFC3339Nano, fmt.Sprint(tk["created_at"]))
		expires, err2 := time.Parse(time.RFC3339Nano, fmt.Sprint(tk["expires_at"]))
		if err1 != nil || err2 != nil || expires.Sub(created) != 90*24*time.Hour {
			t.Errorf("token made with --expires-in 90d = %v, want expires_at 90 days after created_at", tk)
		}
		table := srv.must(t, "tokens", "list")
		if head := strings.SplitN(table, "\n", 2)[0]; !strings.Contains(head, "EXPIRES") || !strings.Contains(head, "LAST USED") {
			t.Errorf("tokens list header %q lacks EXPIRES and LAST USED", head)
		}
		for _, bad := range []string{"soon", "0d", "-5m", "1.5d"} {
			r := srv.ncl(t, "tokens", "create", "--kind", "user", "--name", "x", "--user", "telegram:dana", "--secret-only", "--expires-in", bad)
			if r.code != ExitUsage || !strings.Contains(r.err, "--expires-in") {
				t.Errorf("--expires-in %s: exit %d %q, want a usage error naming the flag", bad, r.code, r.err)
			}
		}
		r := srv.ncl(t, "tokens", "create", "--kind", "user", "--name", "x", "--user", "telegram:dana", "--secret-only", "--expires-in", "10s")
		if r.code != ExitServer || !strings.Contains(r.err, "expires_in") {
			t.Errorf("--expires-in 10s: exit %d %q, want the server's refusal naming expires_in", r.code, r.err)
		}
	})

	t.Run("tokens", func(t *testing.T) {
		secret := strings.TrimSpace(srv.must(t, "tokens", "create", "--kind", "user", "--name", "dana", "--user", "telegram:dana", "--secret-only"))
		if secret == "" || strings.ContainsAny(secret, " \n") {
			t.Fatalf("--secret-only printed %q", secret)
		}
		// The new token works, as dana: her view of pending holds.
		r := runNcl(context.Background(), srv.env("CLAWGUARD_TOKEN_FILE", "", "CLAWGUARD_TOKEN", secret), "approvals", "list", "-o", "json")
		if r.code != 0 {
			t.Errorf("approvals list with a user token: exit %d %s", r.code, r.err)
		}
		toks := jsonArr(t, srv.must(t, "tokens", "list", "-o", "json"))
		var id string
		for _, tk := range toks {
			if tk["name"] == "dana" && tk["kind"] == "user" {
				id, _ = tk["id"].(string)
			}
		}
		if id == "" {
			t.Fatalf("tokens list lacks dana's token: %v", toks)
		}
		srv.must(t, "tokens", "revoke", id)
		// The server caches token lookups for a moment: poll with a deadline.
		deadline := time.Now().Add(10 * time.Second)
		for {
			r = runNcl(context.Background(), srv.env("CLAWGUARD_TOKEN_FILE", "", "CLAWGUARD_TOKEN", secret), "approvals", "list")
			if r.code == ExitServer && strings.HasPrefix(r.err, "ncl: unauthenticated: ") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("revoked token: exit %d %q, want unauthenticated", r.code, r.err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})

	if out := srv.must(t, "runners", "list"); !strings.HasPrefix(out, "ID") {
		t.Errorf("runners list:\n%s", out)
	}
	if r := srv.ncl(t, "decisions", "list", "--effect", "deny", "-o", "json"); r.code != 0 {
		t.Errorf("decisions list: exit %d: %s", r.code, r.err)
	}

	// Issue 32: the operator's reads above (runners list, tokens list, …)
	// are logged, but shown only on request.
	actions := func(args ...string) map[string]bool {
		seen := map[string]bool{}
		for _, d := range jsonArr(t, srv.must(t, append([]string{"decisions", "list", "--actor", "host", "--limit", "0", "-o", "json"}, args...)...)) {
			seen[fmt.Sprint(d["action"])] = true
		}
		return seen
	}
	if def, all := actions(), actions("--reads"); def["runners.list"] || !all["runners.list"] || !def["groups.create"] {
		t.Errorf("decisions of the host: by default %v, with --reads %v; want runners.list only with --reads, groups.create in both", def, all)
	}
	if r := srv.ncl(t, "decisions", "list", "--actor", "nobody-by-that-name"); r.code == 0 {
		t.Errorf("--actor of an unknown user: exit 0, want a clear refusal (%s)", r.out)
	}
	if r := srv.ncl(t, "decisions", "list", "--until", "soon"); r.code == 0 {
		t.Errorf("--until soon: exit 0, want a refusal")
	}
}

// requestHold creates a hold only telegram:dana may resolve, through the
// Approvals.Request API a chat bridge would use.
func requestHold(t *testing.T, srv *realServer, group string) string {
	t.Helper()
	resp, err := guardv1.NewApprovalsClient(srv.Operator(t)).Request(context.Background(), &guardv1.RequestRequest{
		Kind:          "onecli_credential",
		AgentGroupId:  group,
		Card:          &guardv1.HoldCard{Title: "use the deploy key", Question: "Allow research to use the deploy key?"},
		ApproverRule:  &guardv1.ApproverRule{Kind: &guardv1.ApproverRule_Exclusive{Exclusive: &guardv1.ExclusiveApprover{UserId: "telegram:dana"}}},
		ApproverScope: guardv1.ApproverScope_APPROVER_SCOPE_GROUP,
	})
	if err != nil {
		t.Fatalf("Approvals.Request: %v", err)
	}
	return resp.GetHold().GetId()
}

// waitLine reads watch output until a line carries every word, or fails
// after a deadline.
func waitLine(t *testing.T, lines *bufio.Scanner, words ...string) {
	t.Helper()
	found := make(chan string, 1)
	go func() {
		for lines.Scan() {
			l := lines.Text()
			ok := true
			for _, w := range words {
				ok = ok && strings.Contains(l, w)
			}
			if ok {
				found <- l
				return
			}
		}
		close(found)
	}()
	select {
	case _, ok := <-found:
		if !ok {
			t.Fatalf("watch output ended before a line with %v", words)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("no watch line with %v within 15s", words)
	}
}

// TestWatchAcrossServerRestart: the real server goes away under a running
// watch; the watch reconnects and resumes after its last cursor, so every
// event shows exactly once.
func TestWatchAcrossServerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the real server")
	}
	srv := startRealServer(t)
	group := strings.TrimSpace(srv.must(t, "groups", "create", "--name", "research", "--cli-scope", "group", "-q"))
	srv.must(t, "users", "create", "telegram:dana")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var stderr clitest.SyncBuffer
	done := make(chan int, 1)
	go func() {
		code := Run(ctx, []string{"approvals", "watch", "--after", "0", "-o", "json"}, pw, &stderr, srv.env())
		pw.Close()
		done <- code
	}()
	events := make(chan map[string]any, 16)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			var ev map[string]any
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				events <- ev
			}
		}
		close(events)
	}()
	next := func() map[string]any {
		t.Helper()
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("watch ended early: %s", stderr.String())
			}
			return ev
		case <-time.After(20 * time.Second):
			t.Fatalf("no watch event within 20s; stderr: %s", stderr.String())
		}
		return nil
	}
	holdOf := func(ev map[string]any) string {
		h, _ := ev["hold"].(map[string]any)
		id, _ := h["id"].(string)
		return id
	}

	h1 := requestHold(t, srv, group)
	if ev := next(); holdOf(ev) != h1 || ev["type"] != "requested" {
		t.Fatalf("first event = %v, want requested %s", ev, h1)
	}
	srv.Restart(t)
	h2 := requestHold(t, srv, group)
	ev := next()
	if holdOf(ev) != h2 || ev["type"] != "requested" {
		t.Fatalf("event after the restart = %v, want requested %s (not %s again)", ev, h2, h1)
	}
	if c, _ := ev["cursor"].(float64); c <= 1 {
		t.Errorf("cursor after the restart = %v, want it to continue past the first", ev["cursor"])
	}
	if !strings.Contains(stderr.String(), "reconnecting") {
		t.Errorf("watch never said it reconnected: %q", stderr.String())
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("watch exit %d", code)
	}
	for ev := range events {
		t.Errorf("unexpected extra event %v", ev)
	}
}
