package ncl

import (
	"context"
	"strings"
	"testing"
)

// Every paged list command refuses a negative --limit as a usage error,
// before it dials anything.
func TestNegativeLimitIsAUsageErrorForEveryListCommand(t *testing.T) {
	for _, noun := range []string{"groups", "destinations", "members", "messaging-groups", "policies", "roles",
		"sessions", "user-dms", "users", "wirings", "approvals", "tokens", "runners", "decisions"} {
		r := runNcl(context.Background(), func(string) string { return "" }, noun, "list", "--limit", "-1")
		if r.code != ExitUsage || !strings.Contains(r.err, "--limit: must not be negative") {
			t.Errorf("ncl %s list --limit -1: exit %d, stderr %q; want a usage error", noun, r.code, r.err)
		}
	}
}
