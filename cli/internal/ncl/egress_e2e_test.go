package ncl

import (
	"strings"
	"testing"
)

// ncl egress sets, lists and removes a group's rules and default, by the
// group's name; bad hosts and effects are usage errors or refused.
func TestEgressRules(t *testing.T) {
	srv := startRealServer(t)
	srv.must(t, "groups", "create", "--name", "research")
	srv.must(t, "egress", "set", "--group", "research", "--host", "*.GitHub.com", "--effect", "allow")
	srv.must(t, "egress", "set", "--group", "research", "--host", "gist.github.com", "--effect", "deny")
	srv.must(t, "egress", "set", "--group", "research", "--host", "db.example.com:5432", "--effect", "hold")
	srv.must(t, "egress", "set", "--group", "research", "--host", "[2001:db8::1]:8443", "--effect", "allow")
	out := srv.must(t, "egress", "list", "--group", "research")
	for _, want := range []string{"*.github.com", "443, 80", "gist.github.com", "deny", "db.example.com", "5432",
		"2001:db8::1", "8443", "(any other destination)", "hold (the default; not set)"} {
		if !strings.Contains(out, want) {
			t.Fatalf("egress list lacks %q:\n%s", want, out)
		}
	}
	srv.must(t, "egress", "default", "--group", "research", "--effect", "deny")
	pol := jsonObj(t, srv.must(t, "egress", "list", "--group", "research", "-o", "json"))
	if pol["default_effect"] != "deny" || len(pol["rules"].([]any)) != 4 {
		t.Fatalf("egress list -o json: %v", pol)
	}
	srv.must(t, "egress", "unset", "--group", "research", "--host", "gist.github.com")
	if out := srv.must(t, "egress", "list", "--group", "research", "-q"); strings.Contains(out, "gist") || !strings.Contains(out, "db.example.com:5432") {
		t.Fatalf("after unset:\n%s", out)
	}
	for _, bad := range [][]string{
		{"egress", "set", "--group", "research", "--host", "example.org", "--effect", "maybe"},
		{"egress", "set", "--group", "research", "--host", "example.org:http", "--effect", "allow"},
		{"egress", "set", "--group", "research", "--host", "example.org:0", "--effect", "allow"},
	} {
		if r := srv.ncl(t, bad...); r.code != ExitUsage {
			t.Errorf("%v: exit %d, want usage (%s)", bad, r.code, r.err)
		}
	}
	for _, bad := range [][]string{
		{"egress", "set", "--group", "research", "--host", "*", "--effect", "allow"},
		{"egress", "set", "--group", "research", "--host", "*.com", "--effect", "allow"},
		{"egress", "unset", "--group", "research", "--host", "never.set.example"},
	} {
		if r := srv.ncl(t, bad...); r.code != 1 || r.err == "" {
			t.Errorf("%v: exit %d (%s), want refused", bad, r.code, r.err)
		}
	}
}
