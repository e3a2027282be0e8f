package ncl

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Issue 32: every ncl command and flag that takes a group or a user takes
// its name or its id, against the real server; a name nothing has is
// refused (exit 1, "no group named …"), never answered with an empty list;
// a name two users share is refused with their ids.
func TestNamesOrIdsEverywhere(t *testing.T) {
	srv := startRealServer(t)
	research := strings.TrimSpace(srv.must(t, "groups", "create", "--name", "research", "--cli-scope", "group", "-q"))
	ops := strings.TrimSpace(srv.must(t, "groups", "create", "--name", "ops", "--cli-scope", "group", "-q"))
	srv.must(t, "users", "create", "telegram:dana", "--display-name", "Dana")
	srv.must(t, "users", "create", "telegram:erin", "--display-name", "Erin")
	srv.must(t, "users", "create", "telegram:sam1", "--display-name", "Sam")
	srv.must(t, "users", "create", "telegram:sam2", "--display-name", "Sam")

	refused := func(want string, args ...string) {
		t.Helper()
		r := srv.ncl(t, args...)
		if r.code != ExitServer || !strings.Contains(r.err, want) || r.out != "" {
			t.Errorf("ncl %s: exit %d, stdout %q, stderr %q; want exit 1 saying %q", strings.Join(args, " "), r.code, r.out, r.err, want)
		}
	}
	noGroup := `not found: no group named "nosuch"`

	// groups: every <group> argument.
	if id := strings.TrimSpace(srv.must(t, "groups", "get", "research", "-q")); id != research {
		t.Errorf("groups get research -q = %q, want %q", id, research)
	}
	if out := srv.must(t, "groups", "restart", "research"); !strings.Contains(out, "of group "+research) {
		t.Errorf("groups restart research: %q", out)
	}
	srv.must(t, "groups", "update", "research", "--base-image", "clawguard/agent:2")
	srv.must(t, "groups", "config", "update", "research", "--memory", "1g")
	if cfg := jsonObj(t, srv.must(t, "groups", "config", "get", "research", "-o", "json")); cfg["memory"] != "1g" {
		t.Errorf("groups config get research = %v", cfg)
	}
	srv.must(t, "groups", "packages", "add", "research", "curl", "--manager", "apt")
	srv.must(t, "groups", "packages", "remove", "research", "curl", "--manager", "apt")
	srv.must(t, "groups", "mcp", "add", "research", "--name", "fs", "--command", "fs-mcp")
	for _, args := range [][]string{
		{"groups", "get", "nosuch"}, {"groups", "restart", "nosuch"}, {"groups", "update", "nosuch", "--name", "x"},
		{"groups", "delete", "nosuch"}, {"groups", "config", "get", "nosuch"}, {"groups", "packages", "add", "nosuch", "jq", "--manager", "apt"},
		{"groups", "mcp", "remove", "nosuch", "--name", "fs"},
	} {
		refused(noGroup, args...)
	}

	// Group flags of every resource.
	srv.must(t, "destinations", "add", "--group", "research", "--name", "ops", "--target-group", "ops")
	if d := jsonArr(t, srv.must(t, "destinations", "list", "--group", "research", "-o", "json")); len(d) != 1 || d[0]["group"] != research || d[0]["target_group"] != ops {
		t.Errorf("destinations list --group research = %v", d)
	}
	srv.must(t, "policies", "set", "--from", "research", "--to", "ops", "--approver", "Dana", "--approver", "telegram:erin", "--approvals", "2")
	pol := jsonArr(t, srv.must(t, "policies", "list", "--group", "research", "-o", "json"))
	if len(pol) != 1 || pol[0]["from_group"] != research || pol[0]["to_group"] != ops || pol[0]["approver_user_id"] != "telegram:dana" {
		t.Errorf("policies list --group research = %v", pol)
	}
	if out := srv.must(t, "policies", "list"); !strings.Contains(out, "research") || !strings.Contains(out, "Dana, Erin") {
		t.Errorf("policies list by name:\n%s", out)
	}
	srv.must(t, "roles", "grant", "--user", "Dana", "--role", "admin", "--scope", "group", "--group", "research")
	if r := jsonArr(t, srv.must(t, "roles", "list", "--user", "Dana", "--group", "research", "-o", "json")); len(r) != 1 || r[0]["user_id"] != "telegram:dana" || r[0]["group"] != research {
		t.Errorf("roles list --user Dana --group research = %v", r)
	}
	if out := srv.must(t, "roles", "list", "--group", "research"); !strings.Contains(out, "Dana") || !strings.Contains(out, "research") {
		t.Errorf("roles list by name:\n%s", out)
	}
	srv.must(t, "members", "add", "--group", "research", "--user", "Erin")
	if m := jsonArr(t, srv.must(t, "members", "list", "--group", "research", "-o", "json")); len(m) != 1 || m[0]["user_id"] != "telegram:erin" {
		t.Errorf("members list --group research = %v", m)
	}
	srv.must(t, "members", "remove", "--group", "research", "--user", "Erin")
	mg := strings.TrimSpace(srv.must(t, "messaging-groups", "create", "--channel-type", "telegram", "--platform-id", "-100", "--name", "chat", "-q"))
	srv.must(t, "wirings", "create", "--messaging-group", mg, "--group", "research")
	if w := jsonArr(t, srv.must(t, "wirings", "list", "--group", "research", "-o", "json")); len(w) != 1 || w[0]["group"] != research {
		t.Errorf("wirings list --group research = %v", w)
	}
	srv.must(t, "mcp", "servers", "set-default", "--group", "research", "--server", "fs", "--effect", "hold")
	srv.must(t, "mcp", "tools", "set", "--group", "research", "--server", "fs", "--tool", "read_file", "--effect", "allow")
	if tools := jsonArr(t, srv.must(t, "mcp", "tools", "list", "--group", "research", "--server", "fs", "-o", "json")); len(tools) != 1 {
		t.Errorf("mcp tools list --group research = %v", tools)
	}
	srv.must(t, "mcp", "servers", "list", "--group", "research")
	srv.must(t, "sessions", "list", "--group", "research")
	srv.must(t, "decisions", "list", "--group", "research")
	for _, args := range [][]string{
		{"approvals", "list", "--group", "nosuch"}, {"approvals", "watch", "--group", "nosuch"},
		{"decisions", "list", "--group", "nosuch"}, {"sessions", "list", "--group", "nosuch"},
		{"destinations", "list", "--group", "nosuch"}, {"destinations", "add", "--group", "research", "--name", "x", "--target-group", "nosuch"},
		{"destinations", "remove", "--group", "nosuch", "--name", "ops"},
		{"policies", "list", "--group", "nosuch"}, {"policies", "set", "--from", "nosuch", "--to", "ops", "--approver", "Dana"},
		{"policies", "remove", "--from", "research", "--to", "nosuch"},
		{"roles", "list", "--group", "nosuch"}, {"roles", "grant", "--user", "Dana", "--role", "admin", "--scope", "group", "--group", "nosuch"},
		{"members", "list", "--group", "nosuch"}, {"members", "add", "--group", "nosuch", "--user", "Dana"},
		{"wirings", "list", "--group", "nosuch"}, {"wirings", "create", "--messaging-group", mg, "--group", "nosuch"},
		{"mcp", "servers", "list", "--group", "nosuch"}, {"mcp", "tools", "list", "--group", "nosuch", "--server", "fs"},
		{"explain", "--action", "a2a.send", "--actor", "agent:nosuch", "--resource", "to=ops"},
	} {
		refused(noGroup, args...)
	}

	// Users: by display name; a name nobody has, and one two users share.
	if id := strings.TrimSpace(srv.must(t, "users", "get", "Dana", "-q")); id != "telegram:dana" {
		t.Errorf("users get Dana -q = %q", id)
	}
	srv.must(t, "users", "update", "Erin", "--display-name", "Erin E.")
	srv.must(t, "user-dms", "set", "--user", "Dana", "--channel-type", "telegram", "--address", "42")
	if d := jsonArr(t, srv.must(t, "user-dms", "list", "--user", "Dana", "-o", "json")); len(d) != 1 || d[0]["user_id"] != "telegram:dana" {
		t.Errorf("user-dms list --user Dana = %v", d)
	}
	srv.must(t, "user-dms", "remove", "--user", "Dana", "--channel-type", "telegram")
	tok := jsonObj(t, srv.must(t, "tokens", "create", "--kind", "user", "--user", "Dana", "--name", "dana",
		"--secret-file", filepath.Join(t.TempDir(), "dana.token"), "-o", "json"))
	if tok["user_id"] != "telegram:dana" {
		t.Errorf("tokens create --user Dana = %v", tok)
	}
	for _, args := range [][]string{{"users", "get", "Nobody"}, {"roles", "list", "--user", "Nobody"}, {"user-dms", "list", "--user", "Nobody"},
		{"members", "add", "--group", "research", "--user", "Nobody"}, {"approvals", "approve", "hold_x", "--as", "Nobody"}} {
		refused(`not found: no user named "Nobody"`, args...)
	}
	refused(`2 users are named "Sam" (telegram:sam1, telegram:sam2): give the id`, "roles", "list", "--user", "Sam")

	// explain by names answers what it answers by ids.
	byName := srv.must(t, "explain", "--action", "a2a.send", "--actor", "agent:research", "--resource", "to=ops", "-o", "json")
	byID := srv.must(t, "explain", "--action", "a2a.send", "--actor", "agent:"+research, "--resource", "to="+ops, "-o", "json")
	if byName != byID || jsonObj(t, byName)["effect"] != "hold" {
		t.Errorf("explain by names:\n%s\nby ids:\n%s", byName, byID)
	}
	// The group's own admin asks about her group's agent by its name.
	danaEnv := srv.env("CLAWGUARD_TOKEN_FILE", "", "CLAWGUARD_TOKEN", srv.Token(t, &guardv1.CreateTokenRequest{
		Kind: guardv1.Principal_PRINCIPAL_USER, Name: "dana-2", UserId: "telegram:dana"}))
	if r := runNcl(context.Background(), danaEnv, "explain", "--action", "a2a.send", "--actor", "agent:research", "--resource", "to=ops", "-o", "json"); r.code != 0 ||
		jsonObj(t, r.out)["effect"] != "hold" {
		t.Errorf("Dana's explain of agent:research: exit %d %s %s", r.code, r.out, r.err)
	}

	// A quorum hold: the list says what is asked, by whom, and where the
	// quorum stands; Dana's second click says she already approved.
	hold := heldSend(t, srv, research, ops, "hello ops")
	list := srv.must(t, "approvals", "list", "--group", "research")
	for _, want := range []string{hold, "to ops: hello ops", "agent of research", "0 of 2"} {
		if !strings.Contains(list, want) {
			t.Errorf("approvals list --group research lacks %q:\n%s", want, list)
		}
	}
	if out := srv.must(t, "approvals", "approve", hold, "--as", "Dana"); !strings.Contains(out, "approval recorded") {
		t.Errorf("Dana's approval: %q", out)
	}
	if out := srv.must(t, "approvals", "list", "--mine", "--as", "Dana"); !strings.Contains(out, "1 of 2 — you approved") {
		t.Errorf("approvals list --mine --as Dana:\n%s", out)
	}
	if out := srv.must(t, "approvals", "approve", hold, "--as", "telegram:dana"); !strings.Contains(out, "already approved; 1 of 2") {
		t.Errorf("Dana's second click: %q", out)
	}
	danaTok := srv.Token(t, &guardv1.CreateTokenRequest{Kind: guardv1.Principal_PRINCIPAL_USER, Name: "dana-3", UserId: "telegram:dana"})
	if r := runNcl(context.Background(), srv.env("CLAWGUARD_TOKEN_FILE", "", "CLAWGUARD_TOKEN", danaTok), "approvals", "approve", hold); r.code != 0 ||
		!strings.Contains(r.out, "already approved; 1 of 2") {
		t.Errorf("Dana's third click, with her own token: exit %d %q %s", r.code, r.out, r.err)
	}
	if out := srv.must(t, "approvals", "approve", hold, "--as", "Erin E."); !strings.Contains(out, "approved hold "+hold) {
		t.Errorf("Erin's approval: %q", out)
	}
	// decisions list: an ID column, actors by their group's name.
	dl := srv.must(t, "decisions", "list", "--group", "research", "--action", "a2a.send")
	if !strings.HasPrefix(dl, "ID ") || !strings.Contains(dl, "agent:research:") {
		t.Errorf("decisions list:\n%s", dl)
	}
}

// heldSend is an agent of from messaging to through a runner, as the
// runner asks the guard: held, the hold created with the card.
func heldSend(t *testing.T, srv *realServer, from, to, text string) string {
	t.Helper()
	ctx := context.Background()
	tok := srv.Token(t, &guardv1.CreateTokenRequest{Kind: guardv1.Principal_PRINCIPAL_RUNNER, Name: "r1", RunnerId: "r1"})
	reg := guardv1.NewRegistryClient(srv.Dial(t, tok))
	if _, err := reg.RegisterRunner(ctx, &guardv1.RegisterRunnerRequest{RunnerId: "r1", InstanceId: "i1",
		DeliveryActions: []*guardv1.DeliveryActionDecl{{Name: "send_message", CatalogAction: "a2a.send"}}}); err != nil {
		t.Fatal(err)
	}
	sess, err := reg.OpenSession(ctx, &guardv1.OpenSessionRequest{AgentGroupId: from})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := structpb.NewStruct(map[string]any{"to": to, "text": text})
	actx := metadata.AppendToOutgoingContext(ctx, "x-clawguard-session", sess.GetSession().GetId())
	resp, err := guardv1.NewGuardClient(srv.Dial(t, tok)).Decide(actx, &guardv1.DecideRequest{Action: "a2a.send",
		Resource: map[string]string{"to": to}, Payload: p,
		Card: &guardv1.HoldCard{Title: "Message approval", Question: "May it?", DeliveryAction: "send_message", Payload: p}})
	if err != nil || resp.GetHoldId() == "" {
		t.Fatalf("held send: %v, %v", resp, err)
	}
	return resp.GetHoldId()
}
