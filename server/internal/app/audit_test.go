package app_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// syncBuffer is a log sink shared by the server's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines are the JSON log lines with msg, every line parsed (one format).
func (b *syncBuffer) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("a log line is not JSON: %q", sc.Text())
		}
		if l["msg"] == msg {
			out = append(out, l)
		}
	}
	return out
}

// TestAuditLogAtInfo: at the default level (info) the server logs one JSON
// line per refused call (who, what, why), per hold requested and per hold
// resolved; before, refused calls were debug and holds were not logged.
func TestAuditLogAtInfo(t *testing.T) {
	var logBuf syncBuffer
	srv := testserver.StartLogged(t, &logBuf)
	ctx := context.Background()
	op := srv.Operator(t)

	// Unauthenticated: an unknown token.
	bad := testserver.ClientsFor(srv.Conn(t, "cgt_not-a-token", ""))
	if _, err := bad.Registry.ListGroups(ctx, &guardv1.ListGroupsRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("unknown token: %v", err)
	}
	// PermissionDenied: a user token on an operator-only method.
	userTok := srv.Token(t, "user", "", "telegram:eve")
	eve := testserver.ClientsFor(srv.Conn(t, userTok, ""))
	if _, err := eve.Registry.CreateToken(ctx, &guardv1.CreateTokenRequest{Kind: guardv1.Principal_PRINCIPAL_RUNNER, Name: "x", RunnerId: "x"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("user creating a token: %v", err)
	}
	refused := logBuf.lines(t, "call refused")
	if len(refused) != 2 {
		t.Fatalf("%d call refused lines, want 2: %v", len(refused), refused)
	}
	if l := refused[0]; l["level"] != "INFO" || l["code"] != "Unauthenticated" || l["principal"] != "unauthenticated" ||
		l["method"] != "/guard.v1.Registry/ListGroups" || l["why"] == "" || l["peer"] == nil {
		t.Errorf("unauthenticated line: %v", l)
	}
	if l := refused[1]; l["code"] != "PermissionDenied" || l["principal"] != "user" || l["user"] != "telegram:eve" ||
		l["method"] != "/guard.v1.Registry/CreateToken" || !strings.Contains(l["why"].(string), "may not") {
		t.Errorf("permission denied line: %v", l)
	}
	if strings.Contains(logBuf.buf.String(), userTok) {
		t.Error("a token secret was logged")
	}

	// A hold requested by a bridge and approved by the owner.
	if _, err := op.Registry.CreateUser(ctx, &guardv1.CreateUserRequest{Id: "telegram:olga"}); err != nil {
		t.Fatal(err)
	}
	if _, err := op.Registry.GrantRole(ctx, &guardv1.GrantRoleRequest{UserId: "telegram:olga", Role: guardv1.Role_ROLE_OWNER, Scope: guardv1.RoleScope_ROLE_SCOPE_GLOBAL}); err != nil {
		t.Fatal(err)
	}
	bridge := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "bridge", "", ""), ""))
	rr, err := bridge.Approvals.Request(ctx, &guardv1.RequestRequest{Kind: approvals.KindChannelRegistration, ApproverScope: guardv1.ApproverScope_APPROVER_SCOPE_GLOBAL,
		Card: &guardv1.HoldCard{Title: "Register chat", Options: []*guardv1.HoldOption{{Label: "Connect", Value: "connect"}, {Label: "Reject", Value: "reject"}}}})
	if err != nil {
		t.Fatal(err)
	}
	id := rr.GetHold().GetId()
	if _, err := op.Approvals.Resolve(ctx, &guardv1.ResolveRequest{Id: id, Outcome: guardv1.Outcome_OUTCOME_APPROVE, AsUser: "telegram:olga", Choice: "connect"}); err != nil {
		t.Fatal(err)
	}
	var requested, resolved []map[string]any
	testserver.Eventually(t, 5*time.Second, "hold requested and resolved lines", func() bool {
		requested, resolved = logBuf.lines(t, "hold requested"), logBuf.lines(t, "hold resolved")
		return len(requested) == 1 && len(resolved) == 1
	})
	if l := requested[0]; l["hold"] != id || l["kind"] != approvals.KindChannelRegistration || l["audit"] != true {
		t.Errorf("hold requested line: %v", l)
	}
	if l := resolved[0]; l["hold"] != id || l["outcome"] != "approve" || l["resolver"] != "telegram:olga" || l["level"] != "INFO" {
		t.Errorf("hold resolved line: %v", l)
	}
	if w, ok := resolved[0]["waited"].(string); !ok || !strings.HasSuffix(w, "s") {
		t.Errorf("waited is not a duration string: %v", resolved[0]["waited"])
	}
}
