package app_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/clawguard/clawguard/migrations/pgtest"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// get answers the status and body of an HTTP GET.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestHTTPProbesFollowGRPCHealth: /healthz answers while the process does;
// /readyz only while gRPC health is SERVING — an unmigrated database keeps
// it 503, a current schema makes it 200.
func TestHTTPProbesFollowGRPCHealth(t *testing.T) {
	unmigrated, _ := start(t, pgtest.NewEmptyDB(t), false)
	base := "http://" + unmigrated.MetricsAddr()
	if code, body := get(t, base+"/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	testserver.Eventually(t, 10*time.Second, "/readyz reporting NOT_SERVING", func() bool {
		code, body := get(t, base+"/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "NOT_SERVING")
	})

	current, _ := start(t, pgtest.NewEmptyDB(t), true)
	testserver.Eventually(t, 10*time.Second, "/readyz 200 on a current schema", func() bool {
		code, body := get(t, "http://"+current.MetricsAddr()+"/readyz")
		return code == http.StatusOK && body == "ok\n"
	})
}
