package ncl

import (
	"strings"
	"testing"
)

// Issue 41 item 5: a setting that cannot work is refused or named when it
// is made. A policy naming people who are not users is refused; a quorum
// some group's approvers cannot meet today is taken with a warning that
// names who may approve and how many are missing.
func TestSettingsThatCannotWorkAreRefusedOrNamed(t *testing.T) {
	srv := startRealServer(t)
	for _, args := range [][]string{
		{"users", "create", "telegram:dana"},
		{"groups", "create", "--name", "research", "--cli-scope", "group"},
		{"groups", "create", "--name", "ops", "--cli-scope", "group"},
		{"roles", "grant", "--user", "telegram:dana", "--role", "admin", "--scope", "group", "--group", "research"},
	} {
		srv.must(t, args...)
	}
	r := srv.ncl(t, "policies", "set", "--from", "research", "--to", "ops", "--approver", "telegram:dana",
		"--approver", "telegram:erin", "--approver", "telegram:farid", "--approvals", "2")
	if r.code == ExitOK || !strings.Contains(r.err, "telegram:erin, telegram:farid are not a user") {
		t.Errorf("a policy naming non-users: exit %d, %q: want it refused, naming them", r.code, r.err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"catalog", "set", "--action", "self_mod.install_packages", "--approvals", "2"},
			"catalog action self_mod.install_packages needs 2 approvals, but group research"},
		{[]string{"groups", "config", "update", "research", "--hold-approvals", "3"}, "(telegram:dana): 2 approver(s) missing"},
	} {
		r := srv.ncl(t, tc.args...)
		if r.code != ExitOK || !strings.Contains(r.err, "warning: ") || !strings.Contains(r.err, tc.want) {
			t.Errorf("ncl %s: exit %d, stderr %q: want it taken with a warning saying %q", strings.Join(tc.args, " "), r.code, r.err, tc.want)
		}
	}
	// Enough approvers: no warning.
	srv.must(t, "groups", "config", "update", "research", "--hold-approvals", "0")
	if r := srv.ncl(t, "catalog", "set", "--action", "self_mod.install_packages", "--approvals", "1"); r.code != ExitOK || r.err != "" {
		t.Errorf("a quorum of one: exit %d, stderr %q, want no warning", r.code, r.err)
	}
}
