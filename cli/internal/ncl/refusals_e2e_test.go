package ncl

import (
	"regexp"
	"strings"
	"testing"
)

// Issue 46: every refusal a person sees names the way forward — the flag,
// the command or the person that would change the answer — against the
// real server; and a suggested command that is complete is run, and does
// what it says.
func TestRefusalsSayWhatToType(t *testing.T) {
	srv := startRealServer(t)
	research := strings.TrimSpace(srv.must(t, "groups", "create", "--name", "research", "--cli-scope", "group", "-q"))
	strings.TrimSpace(srv.must(t, "groups", "create", "--name", "ops", "--cli-scope", "group", "-q"))
	srv.must(t, "users", "create", "telegram:dana", "--display-name", "Dana")
	srv.must(t, "users", "create", "telegram:olga", "--display-name", "Olga")
	srv.must(t, "roles", "grant", "--user", "Olga", "--role", "owner", "--scope", "global")
	srv.must(t, "roles", "grant", "--user", "Dana", "--role", "admin", "--scope", "group", "--group", "research")
	srv.must(t, "destinations", "add", "--group", "research", "--name", "ops", "--target-group", "ops")
	srv.must(t, "policies", "set", "--from", "research", "--to", "ops", "--approver", "Dana")
	hold := heldSend(t, srv, research, strings.TrimSpace(srv.must(t, "groups", "get", "ops", "-q")), "hello ops")

	for _, c := range []struct {
		why   string
		args  []string
		wants []string
	}{
		{"an operator token approving names no user",
			[]string{"approvals", "approve", hold, "--for", "1h"}, []string{"--as <user>"}},
		{"an owner on a hold the policy names Dana alone for",
			[]string{"approvals", "approve", hold, "--as", "Olga"}, []string{"names telegram:dana alone", "ask telegram:dana", "ncl policies set --from " + research}},
		{"--as on a list without --mine",
			[]string{"approvals", "list", "--as", "Dana"}, []string{"--mine"}},
		{"a mode nothing has",
			[]string{"policies", "set", "--from", "research", "--to", "ops", "--approver", "Dana", "--mode", "block"}, []string{"enforce, audit, warn or inherit"}},
	} {
		r := srv.ncl(t, c.args...)
		if r.code == 0 {
			t.Errorf("%s: ncl %s succeeded: %s", c.why, strings.Join(c.args, " "), r.out)
			continue
		}
		for _, w := range c.wants {
			if !strings.Contains(r.err, w) {
				t.Errorf("%s: ncl %s says %q; want it to name %q", c.why, strings.Join(c.args, " "), r.err, w)
			}
		}
	}

	// A quorum nobody can meet (3: Dana and the owner may approve): the deny
	// says who may approve and the command that adds one more.
	srv.must(t, "catalog", "set", "--action", "self_mod.install_packages", "--approvals", "3")
	out := srv.must(t, "explain", "--action", "self_mod.install_packages", "--actor", "agent:research", "--payload", `{"apt":["jq"]}`)
	for _, w := range []string{"only 2 users may approve it (Dana, Olga)", "make one more user an admin of group research (ncl roles grant --user <user> --role admin --scope group --group research)"} {
		if !strings.Contains(out, w) {
			t.Errorf("explain of an unreachable quorum lacks %q:\n%s", w, out)
		}
	}
	srv.must(t, "users", "create", "telegram:erin", "--display-name", "Erin")
	srv.must(t, "roles", "grant", "--user", "telegram:erin", "--role", "admin", "--scope", "group", "--group", "research")
	if out := srv.must(t, "explain", "--action", "self_mod.install_packages", "--actor", "agent:research", "--payload", `{"apt":["jq"]}`, "-o", "json"); jsonObj(t, out)["effect"] != "hold" {
		t.Errorf("with the approver the fix named, the install still does not hold:\n%s", out)
	}

	// No destination ops → research: the suggested command is complete, by
	// name, and running it gives the answer it promised.
	out = srv.must(t, "explain", "--action", "a2a.send", "--actor", "agent:ops", "--resource", "to=research")
	m := regexp.MustCompile(`\((ncl destinations add [^)]*)\)`).FindStringSubmatch(out)
	if m == nil || m[1] != "ncl destinations add --group ops --target-group research --name research" {
		t.Fatalf("explain's suggested destination: %v\n%s", m, out)
	}
	srv.must(t, strings.Fields(m[1])[1:]...)
	if out := srv.must(t, "explain", "--action", "a2a.send", "--actor", "agent:ops", "--resource", "to=research", "-o", "json"); jsonObj(t, out)["effect"] != "allow" {
		t.Errorf("after the suggested command, ops → research is not allowed:\n%s", out)
	}
}
