package ncl

import (
	"strings"
	"testing"
)

// ncl approvals get --history shows what the console's hold page shows:
// the hold's events and the decisions that named it, read through
// Approvals.Get.
func TestApprovalsGetHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the real server")
	}
	srv := startRealServer(t)
	srv.must(t, "users", "create", "--id", "telegram:dana")
	g := strings.TrimSpace(srv.must(t, "groups", "create", "--name", "research", "-q"))
	hold := requestHold(t, srv, g)
	srv.must(t, "approvals", "reject", hold, "--as", "telegram:dana", "--reason", "not now")
	out := srv.must(t, "approvals", "get", hold, "--history")
	for _, want := range []string{"ID:", hold, "EVENT", "requested", "resolved", "reject", "telegram:dana", "DECISIONS: -"} {
		if !strings.Contains(out, want) {
			t.Errorf("approvals get --history lacks %q:\n%s", want, out)
		}
	}
	if got := jsonObj(t, srv.must(t, "approvals", "get", hold, "--history", "-o", "json")); got["id"] != hold || got["status"] != "rejected" {
		t.Errorf("approvals get --history -o json = %v, want the hold", got)
	}
}
