package guardtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"sync"
	"testing"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestGuardHoldIsAudited: a hold the guard creates (an agent's held a2a
// send) is one info line "hold requested" naming the hold, the action, the
// actor and the approver rule — logged after the commit; a dry run is not.
func TestGuardHoldIsAudited(t *testing.T) {
	var logs lockedBuffer
	srv := testserver.StartLogged(t, &logs)
	op := srv.Operator(t)
	w := a2aWorld(t, srv)
	if _, err := op.Guard.Decide(ctx, a2aSend(w, true)); err != nil {
		t.Fatal(err)
	}
	resp, err := op.Guard.Decide(ctx, a2aSend(w, false))
	if err != nil || resp.GetDecision().GetEffect() != guardv1.Effect_EFFECT_HOLD || resp.GetHoldId() == "" {
		t.Fatalf("decide: %v %v", resp, err)
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	var lines []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(logs.b.Bytes()))
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("not a JSON log line: %q", sc.Text())
		}
		if l["msg"] == "hold requested" {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%d hold requested lines, want 1 (the dry run creates none): %v", len(lines), lines)
	}
	if l := lines[0]; l["hold"] != resp.GetHoldId() || l["action"] != "a2a.send" || l["audit"] != true || l["level"] != "INFO" ||
		l["actor"] == "" || l["approver_rule"] == "" {
		t.Fatalf("hold requested line: %v", l)
	}
}
