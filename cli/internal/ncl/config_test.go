package ncl

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Profiles of the config file, and the shell completion ncl writes.

func TestCompletionScripts(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish"} {
		r := runNcl(context.Background(), envOf(nil), "completion", sh)
		if r.code != 0 || !strings.Contains(r.out, "ncl") || len(r.out) < 1000 {
			t.Errorf("completion %s: exit %d, %d bytes", sh, r.code, len(r.out))
		}
	}
	// Enum flags complete their words.
	r := runNcl(context.Background(), envOf(nil), "__complete", "roles", "grant", "--scope", "")
	if !strings.Contains(r.out, "global") || !strings.Contains(r.out, "group") {
		t.Errorf("completion of --scope: %q", r.out)
	}
}

func TestConfigProfileFromFile(t *testing.T) {
	f := startFake(t)
	dir := t.TempDir()
	tok := filepath.Join(dir, "tok")
	if err := os.WriteFile(tok, []byte("cgt_fromfile\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "ncl.yaml")
	body := "current: local\nprofiles:\n  local: {server: " + f.addr + ", token_file: " + tok + "}\n  other: {server: 127.0.0.1:1}\n"
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runNcl(context.Background(), envOf(map[string]string{"CLAWGUARD_CONFIG": cfg}), "groups", "get", "ag_ok", "-q")
	if r.code != 0 || strings.TrimSpace(r.out) != "ag_ok" {
		t.Fatalf("via profile: exit %d, %q %q", r.code, r.out, r.err)
	}
	f.mu.Lock()
	last := f.auth[len(f.auth)-1]
	f.mu.Unlock()
	if last != "Bearer cgt_fromfile" {
		t.Errorf("token from the profile's token_file: got %q", last)
	}
	// --profile other points elsewhere; a flag beats it again.
	r = runNcl(context.Background(), envOf(map[string]string{"CLAWGUARD_CONFIG": cfg, "CLAWGUARD_TOKEN": "t"}), "--profile", "other", "groups", "get", "ag_ok")
	if r.code != 2 || !strings.Contains(r.err, "127.0.0.1:1") {
		t.Errorf("--profile other: exit %d %q", r.code, r.err)
	}
	r = runNcl(context.Background(), envOf(map[string]string{"CLAWGUARD_CONFIG": cfg, "CLAWGUARD_TOKEN": "t"}), "--profile", "other", "--server", f.addr, "groups", "get", "ag_ok")
	if r.code != 0 {
		t.Errorf("--server beats the profile: exit %d %q", r.code, r.err)
	}
	r = runNcl(context.Background(), envOf(map[string]string{"CLAWGUARD_CONFIG": cfg}), "--profile", "nope", "groups", "list")
	if r.code != 2 || !strings.Contains(r.err, `profile "nope" not found`) {
		t.Errorf("unknown profile: exit %d %q", r.code, r.err)
	}
}

// TestConfigContexts: set-context writes a profile (0600), use-context
// switches, get-contexts lists, and the current profile is what commands use.
func TestConfigContexts(t *testing.T) {
	f := startFake(t)
	dir := t.TempDir()
	tok := filepath.Join(dir, "tok")
	if err := os.WriteFile(tok, []byte("cgt_ctx\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := envOf(map[string]string{"HOME": dir})
	run := func(args ...string) result { return runNcl(context.Background(), env, args...) }
	if r := run("config", "set-context", "local", "--server", f.addr, "--token-file", tok); r.code != 0 || !strings.Contains(r.out, `created profile "local"`) {
		t.Fatalf("set-context: %d %q %q", r.code, r.out, r.err)
	}
	if r := run("config", "set-context", "prod", "--server", "127.0.0.1:1", "--token-file", tok, "--use"); r.code != 0 {
		t.Fatalf("set-context --use: %d %q", r.code, r.err)
	}
	path := filepath.Join(dir, ".config", "clawguard", "ncl.yaml")
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("config file: %v %v", fi, err)
	}
	if r := run("config", "current-context"); strings.TrimSpace(r.out) != "prod" {
		t.Fatalf("current-context after --use: %q", r.out)
	}
	if r := run("groups", "get", "ag_ok"); r.code != 2 || !strings.Contains(r.err, "127.0.0.1:1") {
		t.Fatalf("prod is current: exit %d %q", r.code, r.err)
	}
	if r := run("config", "use-context", "local"); r.code != 0 {
		t.Fatalf("use-context: %d %q", r.code, r.err)
	}
	if r := run("groups", "get", "ag_ok", "-q"); r.code != 0 || strings.TrimSpace(r.out) != "ag_ok" {
		t.Fatalf("local is current: exit %d %q %q", r.code, r.out, r.err)
	}
	r := run("config", "get-contexts")
	if r.code != 0 || !regexp.MustCompile(`(?m)^\*\s+local\s+`+regexp.QuoteMeta(f.addr)).MatchString(r.out) || !strings.Contains(r.out, "prod") {
		t.Fatalf("get-contexts:\n%s", r.out)
	}
	var rows []map[string]any
	if r := run("config", "get-contexts", "-o", "json"); json.Unmarshal([]byte(r.out), &rows) != nil || len(rows) != 2 || rows[0]["name"] != "local" || rows[0]["current"] != true {
		t.Fatalf("get-contexts -o json: %s", r.out)
	}
}

func (f *fakeServer) ListGroups(context.Context, *guardv1.ListGroupsRequest) (*guardv1.ListGroupsResponse, error) {
	return &guardv1.ListGroupsResponse{Groups: []*guardv1.Group{{Id: "ag_4888a21379a5cf01", Name: "research"}}}, nil
}

func (f *fakeServer) ListUsers(context.Context, *guardv1.ListUsersRequest) (*guardv1.ListUsersResponse, error) {
	return &guardv1.ListUsersResponse{Users: []*guardv1.User{{Id: "telegram:dana", DisplayName: "Dana"}}}, nil
}

func (f *fakeServer) List(context.Context, *guardv1.ListRequest) (*guardv1.ListResponse, error) {
	return &guardv1.ListResponse{Holds: []*guardv1.Hold{{Id: "hold_3266c0872182ee7add9f", Kind: "a2a_message_gate", Title: "Message approval"}}}, nil
}

// TestDynamicCompletion: hold ids, groups by name (with their ids) and
// users (with their names) come from the server; without a server, completion offers nothing and no error.
func TestDynamicCompletion(t *testing.T) {
	f := startFake(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"__complete", "approvals", "approve", ""}, "hold_3266c0872182ee7add9f\ta2a_message_gate: Message approval"},
		{[]string{"__complete", "approvals", "get", ""}, "hold_3266c0872182ee7add9f"},
		{[]string{"__complete", "groups", "get", ""}, "research\tag_4888a21379a5cf01"},
		{[]string{"__complete", "groups", "get", "res"}, "research\tag_4888a21379a5cf01"},
		{[]string{"__complete", "approvals", "list", "--group", ""}, "research\tag_4888a21379a5cf01"},
		{[]string{"__complete", "policies", "set", "--from", ""}, "research\tag_4888a21379a5cf01"},
		{[]string{"__complete", "approvals", "approve", "hold_1", "--as", ""}, "telegram:dana\tDana"},
		{[]string{"__complete", "policies", "set", "--approver", ""}, "telegram:dana\tDana"},
	} {
		r := runNcl(context.Background(), f.env(t), c.args...)
		if r.code != 0 || !strings.Contains(r.out, c.want) {
			t.Errorf("ncl %q: exit %d\n%s", c.args, r.code, r.out)
		}
	}
	r := runNcl(context.Background(), envOf(map[string]string{"HOME": t.TempDir()}), "__complete", "approvals", "approve", "")
	if r.code != 0 || strings.Contains(r.out, "hold_") {
		t.Errorf("completion without a token: exit %d %q", r.code, r.out)
	}
}
