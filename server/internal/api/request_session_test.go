package api_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// A Request's session receives the hold's notices ("your request was
// rejected"), so it must be a session of the request's agent group: a
// bridge must not push notices into an arbitrary agent's session.
func TestRequestSessionMustBelongToTheAgentGroup(t *testing.T) {
	srv := testserver.Start(t)
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO agent_groups (id, name) VALUES ('ag-mine', 'Mine'), ('ag-victim', 'Victim')`,
		`INSERT INTO sessions (id, agent_group_id) VALUES ('sess-mine', 'ag-mine'), ('sess-victim', 'ag-victim')`,
		`INSERT INTO users (id) VALUES ('tg:olivia')`,
		`INSERT INTO user_roles (user_id, role) VALUES ('tg:olivia', 'owner')`,
	} {
		if _, err := srv.Pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	bridge := testserver.ClientsFor(srv.Conn(t, srv.BridgeToken(t, "telegram"), ""))
	card := &guardv1.HoldCard{Title: "Use the deploy key"}

	for _, c := range []struct{ name, session, group string }{
		{"another group's session", "sess-victim", "ag-mine"},
		{"unknown session", "sess-nope", "ag-mine"},
		{"unknown session, no group", "sess-nope", ""},
	} {
		_, err := bridge.Approvals.Request(ctx, &guardv1.RequestRequest{Kind: "onecli_credential", SessionId: c.session, AgentGroupId: c.group, Card: card})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "session_id") {
			t.Errorf("%s: %v, want InvalidArgument naming session_id", c.name, err)
		}
	}
	var held int
	if err := srv.Pool.QueryRow(ctx, `SELECT count(*) FROM holds`).Scan(&held); err != nil || held != 0 {
		t.Fatalf("refused requests created %d holds (%v)", held, err)
	}

	// The session's own group, given or derived, is accepted.
	res, err := bridge.Approvals.Request(ctx, &guardv1.RequestRequest{Kind: "onecli_credential", SessionId: "sess-mine", AgentGroupId: "ag-mine", Card: card})
	if err != nil || res.GetHold().GetSessionId() != "sess-mine" {
		t.Fatalf("request in its own group's session: %v (%v)", res.GetHold(), err)
	}
	res, err = bridge.Approvals.Request(ctx, &guardv1.RequestRequest{Kind: "onecli_credential", SessionId: "sess-mine", Card: &guardv1.HoldCard{Title: "Another"}})
	if err != nil {
		t.Fatalf("request with a session and no group: %v", err)
	}
	if g := res.GetHold().GetAgentGroupId(); g != "ag-mine" {
		t.Fatalf("derived agent group = %q, want ag-mine", g)
	}
}
