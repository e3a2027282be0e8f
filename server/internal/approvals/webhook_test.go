package approvals_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/encoding/protojson"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/config"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// TestWebhookSignedWithRetries: every event is POSTed signed with
// HMAC-SHA256 of the body; a failed attempt is retried (and counted) and the
// events still arrive once each, in order.
func TestWebhookSignedWithRetries(t *testing.T) {
	t.Parallel()
	secret := "s3cret-for-tests"
	var (
		mu       sync.Mutex
		attempts int
		got      []*guardv1.WatchResponse
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
		ev := &guardv1.WatchResponse{}
		if err := protojson.Unmarshal(body, ev); err != nil {
			t.Errorf("webhook body: %v", err)
		}
		got = append(got, ev)
	}))
	defer hook.Close()
	secretFile := filepath.Join(t.TempDir(), "webhook.secret")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := testserver.Start(t, func(c *config.Config) { c.WebhookURL = hook.URL; c.WebhookSecretFile = secretFile })
	seed(t, srv)
	h := createOn(t, srv, approvals.CreateRequest{Kind: "create_agent", SessionID: "sess-1", Title: "t"})
	if _, err := userClients(t, srv, owner).Approvals.Resolve(context.Background(), &guardv1.ResolveRequest{Id: h.GetId(), Outcome: guardv1.Outcome_OUTCOME_REJECT, Reason: "no"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("webhook got %d events after %d attempts", n, attempts)
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if badSig != 0 || attempts != 3 || len(got) != 2 {
		t.Fatalf("attempts %d, bad signatures %d, events %d", attempts, badSig, len(got))
	}
	if got[0].GetType() != guardv1.EventType_EVENT_TYPE_REQUESTED || got[1].GetOutcome() != guardv1.Outcome_OUTCOME_REJECT ||
		got[0].GetHold().GetId() != h.GetId() || got[1].GetHold().GetReason() != "no" || got[1].GetResolver() != owner {
		t.Fatalf("webhook events: %v", got)
	}
	if f := testutil.ToFloat64(srv.Deps().Metrics.WebhookFailuresTotal); f != 1 {
		t.Fatalf("webhook failures counted %v, want 1", f)
	}
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
		seen[r.Header.Get("X-Clawguard-Cursor")]++
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
