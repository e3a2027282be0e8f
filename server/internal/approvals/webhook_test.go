package approvals_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	osexec "os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/jsonview"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/config"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// TestWebhookSignedWithRetries: every event is POSTed signed with
// HMAC-SHA256 of the body; a failed attempt is retried (and counted) and the
// events still arrive once each, in order. The body is the object
// `ncl approvals watch -o json` prints for the event (snake_case fields,
// enums as lower-case words) plus "version", and the verification example
// of deploy/WEBHOOK.md accepts it (and refuses a tampered body).
func TestWebhookSignedWithRetries(t *testing.T) {
	t.Parallel()
	secret := "s3cret-for-tests"
	type delivery struct {
		body      []byte
		signature string
		obj       map[string]any
	}
	var (
		mu       sync.Mutex
		attempts int
		got      []delivery
		badSig   int
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		attempts++
		if attempts == 1 {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		m := hmac.New(sha256.New, []byte(secret))
		m.Write(body)
		if r.Header.Get(approvals.SignatureHeader) != "sha256="+hex.EncodeToString(m.Sum(nil)) {
			badSig++
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var obj map[string]any
		if err := json.Unmarshal(body, &obj); err != nil {
			t.Errorf("webhook body: %v", err)
		}
		if r.Header.Get(approvals.CursorHeader) != fmt.Sprint(obj["cursor"]) {
			t.Errorf("cursor header %q, body cursor %v", r.Header.Get(approvals.CursorHeader), obj["cursor"])
		}
		got = append(got, delivery{body: body, signature: r.Header.Get(approvals.SignatureHeader), obj: obj})
	}))
	defer hook.Close()
	secretFile := filepath.Join(t.TempDir(), "webhook.secret")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := testserver.Start(t, func(c *config.Config) { c.WebhookURL = hook.URL; c.WebhookSecretFile = secretFile })
	seed(t, srv)
	w := watch(t, srv.Operator(t), &guardv1.WatchRequest{AfterCursor: now(t, srv)})
	h := createOn(t, srv, approvals.CreateRequest{Kind: "create_agent", SessionID: "sess-1", Title: "t"})
	if _, err := userClients(t, srv, owner).Approvals.Resolve(context.Background(), &guardv1.ResolveRequest{Id: h.GetId(), Outcome: guardv1.Outcome_OUTCOME_REJECT, Reason: "no <way>"}); err != nil {
		t.Fatal(err)
	}
	testserver.Eventually(t, 10*time.Second, "two webhook deliveries", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= 2
	})
	watched := w.waitFor(t, 2)
	mu.Lock()
	defer mu.Unlock()
	if badSig != 0 || attempts != 3 || len(got) != 2 {
		t.Fatalf("attempts %d, bad signatures %d, events %d", attempts, badSig, len(got))
	}
	req, res := got[0].obj, got[1].obj
	hold, _ := res["hold"].(map[string]any)
	if req["type"] != "requested" || res["type"] != "resolved" || res["outcome"] != "reject" || res["resolver"] != owner ||
		hold["id"] != h.GetId() || hold["status"] != "rejected" || hold["reason"] != "no <way>" || req["version"] != float64(approvals.WebhookVersion) {
		t.Fatalf("webhook events: %s\n%s", got[0].body, got[1].body)
	}
	if _, ok := res["approvals_remaining"]; !ok {
		t.Errorf("not every field present (approvals_remaining missing): %s", got[1].body)
	}
	// The same object ncl prints for the watched event, plus version.
	for i, ev := range watched {
		v, err := jsonview.Value(ev)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(v)
		var wantObj map[string]any
		_ = json.Unmarshal(want, &wantObj)
		wantObj["version"] = float64(approvals.WebhookVersion)
		if !reflect.DeepEqual(wantObj, got[i].obj) {
			t.Errorf("event %d: webhook %s\nncl -o json %s", i, got[i].body, want)
		}
	}
	if f := testutil.ToFloat64(srv.Deps().Metrics.WebhookFailuresTotal); f != 1 {
		t.Fatalf("webhook failures counted %v, want 1", f)
	}

	// deploy/WEBHOOK.md's verification example, run as documented.
	verify := docBlock(t, "../../../deploy/WEBHOOK.md", "verify")
	run := func(body []byte, sig string) error {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "body.json"), body, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := osexec.Command("bash", "-euc", verify)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "WEBHOOK_SECRET="+secret, "SIGNATURE="+sig)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	if err := run(got[1].body, got[1].signature); err != nil {
		t.Fatalf("the documented verification refused a genuine delivery: %v", err)
	}
	if err := run(append(got[1].body, ' '), got[1].signature); err == nil {
		t.Fatal("the documented verification accepted a tampered body")
	}
}

// docBlock is the fenced block of a Markdown doc that follows the HTML
// comment <!-- name -->.
func docBlock(t *testing.T, path, name string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- "+name+" -->")
	if !ok {
		t.Fatalf("%s has no <!-- %s --> block", path, name)
	}
	_, rest, _ = strings.Cut(rest, "```sh\n")
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatalf("%s: unterminated block %s", path, name)
	}
	return block
}

// TestWebhookOneLeaderAcrossReplicas: with two replicas configured, each
// event is posted once; when a replica stops, the other carries on from
// the recorded cursor without a gap.
func TestWebhookOneLeaderAcrossReplicas(t *testing.T) {
	t.Parallel()
	var (
		mu   sync.Mutex
		seen = map[string]int{}
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		seen[r.Header.Get(approvals.CursorHeader)]++
	}))
	defer hook.Close()
	secretFile := filepath.Join(t.TempDir(), "webhook.secret")
	if err := os.WriteFile(secretFile, []byte("k"), 0o600); err != nil {
		t.Fatal(err)
	}
	opt := func(c *config.Config) { c.WebhookURL = hook.URL; c.WebhookSecretFile = secretFile }
	a := testserver.Start(t, opt)
	seed(t, a)
	b := testserver.StartOn(t, a.URL, opt)
	waitPosted := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			mu.Lock()
			got := len(seen)
			mu.Unlock()
			if got >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("webhook got %d distinct events, want %d", got, n)
			}
		}
	}
	for range 3 {
		createOn(t, a, approvals.CreateRequest{Kind: "create_agent", SessionID: "sess-1", Title: "t"})
	}
	waitPosted(3)
	a.Stop()
	for range 2 {
		createOn(t, b, approvals.CreateRequest{Kind: "create_agent", SessionID: "sess-1", Title: "t"})
	}
	waitPosted(5)
	mu.Lock()
	defer mu.Unlock()
	for c, n := range seen {
		if n != 1 {
			t.Errorf("event %s posted %d times", c, n)
		}
	}
	if len(seen) != 5 {
		t.Errorf("posted %v", seen)
	}
}

// TestWebhookLagGrowsWhileTheSinkRefusesAndClearsOnceItAccepts: the lag
// gauge is the age of the oldest event past the webhook's recorded cursor,
// read from the table (so every replica reports it, and ClawguardWebhookBehind
// can fire while deliveries fail).
func TestWebhookLagGrowsWhileTheSinkRefusesAndClearsOnceItAccepts(t *testing.T) {
	t.Parallel()
	var (
		mu     sync.Mutex
		accept bool
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if !accept {
			http.Error(w, "down", http.StatusBadGateway)
		}
	}))
	defer hook.Close()
	secretFile := filepath.Join(t.TempDir(), "webhook.secret")
	if err := os.WriteFile(secretFile, []byte("s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := testserver.Start(t, func(c *config.Config) { c.WebhookURL = hook.URL; c.WebhookSecretFile = secretFile })
	seed(t, srv)
	ctx := context.Background()
	testserver.Eventually(t, 10*time.Second, "a webhook leader recorded its start", func() bool {
		var n int
		_ = srv.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_progress`).Scan(&n)
		return n == 1
	})
	h := createOn(t, srv, approvals.CreateRequest{Kind: "create_agent", SessionID: "sess-1", Title: "t"})
	exec(t, srv.Pool, `UPDATE hold_events SET created_at = now() - interval '1 hour' WHERE hold_id = $1`, h.GetId())
	svc, lag := srv.Deps().Approvals, srv.Deps().Metrics.WebhookLagSeconds
	if err := svc.RefreshGauges(ctx); err != nil {
		t.Fatal(err)
	}
	if l := testutil.ToFloat64(lag); l < 3600 || l > 3700 {
		t.Fatalf("webhook lag %v s while the sink refuses an hour-old event, want ~3600", l)
	}
	mu.Lock()
	accept = true
	mu.Unlock()
	testserver.Eventually(t, 20*time.Second, "the lag back to 0 once the sink accepts", func() bool {
		return svc.RefreshGauges(ctx) == nil && testutil.ToFloat64(lag) == 0
	})
}
