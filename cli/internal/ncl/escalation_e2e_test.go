package ncl

import (
	"strings"
	"testing"
)

// Issue 32: escalation set by name on the catalog and on a policy, shown in
// the lists, carried by export/apply; an unknown name is refused.
func TestEscalationFlagsListsAndExport(t *testing.T) {
	srv := startRealServer(t)
	for _, args := range [][]string{
		{"users", "create", "telegram:dana", "--display-name", "Dana"},
		{"users", "create", "telegram:erin", "--display-name", "Erin"},
		{"groups", "create", "--name", "research"},
		{"groups", "create", "--name", "ops"},
		{"destinations", "add", "--group", "research", "--name", "ops", "--target-group", "ops"},
		{"catalog", "set", "--action", "a2a.send", "--remind-after", "10m", "--escalate-after", "30m", "--escalate-to", "Erin", "--escalate-to", "group:ops"},
		{"policies", "set", "--from", "research", "--to", "ops", "--approver", "telegram:dana", "--remind-after", "5m", "--escalate-after", "1h", "--escalate-to", "telegram:erin"},
	} {
		srv.must(t, args...)
	}
	if out := srv.must(t, "catalog", "list"); !strings.Contains(out, "remind 10m, escalate 30m to Erin, admins of ops") {
		t.Errorf("catalog list does not show the plan:\n%s", out)
	}
	if out := srv.must(t, "policies", "list"); !strings.Contains(out, "remind 5m, escalate 1h to Erin") {
		t.Errorf("policies list does not show the plan:\n%s", out)
	}
	exported := srv.must(t, "export")
	for _, want := range []string{"remindAfter: 10m0s", "escalateAfter: 30m0s", "- group:ops", "remindAfter: 5m0s", "- telegram:erin"} {
		if !strings.Contains(exported, want) {
			t.Errorf("export lacks %q:\n%s", want, exported)
		}
	}
	if r := srv.applyFile(t, exported, "--dry-run"); r.code != 0 || strings.TrimSpace(r.out) != "No changes." {
		t.Fatalf("export | apply --dry-run: exit %d, %q, want no changes", r.code, r.out)
	}
	r := srv.ncl(t, "catalog", "set", "--action", "a2a.send", "--escalate-after", "30m", "--escalate-to", "Nobody")
	if r.code == 0 || !strings.Contains(r.err, "Nobody") {
		t.Fatalf("an unknown approver: exit %d, stderr %q", r.code, r.err)
	}
}
