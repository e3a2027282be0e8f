package guardtest

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/approvals"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// notices returns the texts of the NotifyAgent pushes queued for a session.
func notices(t *testing.T, w *world, session string) []string {
	t.Helper()
	rows, err := w.srv.Pool.Query(ctx, `SELECT body FROM runner_pushes WHERE session_id = $1 AND kind = 'notify' ORDER BY created_at`, w.sub(session))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			t.Fatal(err)
		}
		var p guardv1.Push
		if err := proto.Unmarshal(b, &p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p.GetNotify().GetText())
	}
	return out
}

// An agent's approval-access admin RPC is held as a cli_command hold
// carrying the request (its group filled in); approving it replays the
// request once through the guard with the grant, and the agent is told.
func TestAgentAdminCallHeldThenReplayedOnApproval(t *testing.T) {
	srv := testserver.Start(t)
	w := newWorld(t, srv)
	owner := withOwner(w)
	w.exec(`INSERT INTO users (id) VALUES ('telegram:{A}-new')`)
	agent := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "runner", w.R, ""), w.SA))

	// Open reads pass; other groups and non-scoped resources do not.
	if _, err := agent.Registry.ListMembers(ctx, &guardv1.ListMembersRequest{}); err != nil {
		t.Fatalf("own-group read: %v", err)
	}
	if _, err := agent.Registry.ListMembers(ctx, &guardv1.ListMembersRequest{Group: w.B}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("other group's read: %v, want PermissionDenied", err)
	}
	if _, err := agent.Registry.ListRoles(ctx, &guardv1.ListRolesRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("roles read under group scope: %v, want PermissionDenied", err)
	}

	_, err := agent.Registry.AddMember(ctx, &guardv1.AddMemberRequest{UserId: w.sub("telegram:{A}-new")})
	st := status.Convert(err)
	if st.Code() != codes.FailedPrecondition {
		t.Fatalf("AddMember: %v, want FailedPrecondition (approval pending)", err)
	}
	var pending *guardv1.ApprovalPending
	for _, d := range st.Details() {
		if p, ok := d.(*guardv1.ApprovalPending); ok {
			pending = p
		}
	}
	if pending == nil || pending.GetHoldId() == "" {
		t.Fatalf("no ApprovalPending detail on %v", st)
	}
	if n := w.count(`SELECT count(*) FROM holds WHERE id = '` + pending.GetHoldId() + `' AND kind = 'cli_command' AND session_id = '{SA}'
		AND payload->>'method' = '/guard.v1.Registry/AddMember' AND payload->'request'->>'group' = '{A}'
		AND payload->'caller'->>'session_id' = '{SA}' AND approver_scope = 'group'`); n != 1 {
		t.Fatal("the hold does not carry the filled request and its caller")
	}
	if n := w.count(`SELECT count(*) FROM agent_group_members WHERE agent_group_id = '{A}'`); n != 0 {
		t.Fatal("the held call ran")
	}

	if _, err := srv.Deps().Approvals.Resolve(ctx, approvals.Resolution{HoldID: pending.GetHoldId(),
		Outcome: guardv1.Outcome_OUTCOME_APPROVE, Clicker: owner}); err != nil {
		t.Fatalf("approve: %v", err)
	}
	if n := w.count(`SELECT count(*) FROM agent_group_members WHERE agent_group_id = '{A}' AND user_id = 'telegram:{A}-new'`); n != 1 {
		t.Fatal("the approved call was not replayed")
	}
	if n := w.count(`SELECT count(*) FROM holds WHERE id = '` + pending.GetHoldId() + `' AND consumed_at IS NOT NULL`); n != 1 {
		t.Fatal("the replay did not consume its grant")
	}
	texts := notices(t, w, "{SA}")
	if len(texts) == 0 || !strings.Contains(texts[len(texts)-1], "approved and ran") {
		t.Fatalf("requester not told of the result: %q", texts)
	}
}

// D2: a stored caller context that does not parse refuses the replay —
// never run as host or anyone — and the requester is told.
func TestMalformedCallerContextRefusesReplay(t *testing.T) {
	srv := testserver.Start(t)
	w := newWorld(t, srv)
	owner := withOwner(w)
	w.exec(`INSERT INTO users (id) VALUES ('telegram:{A}-new')`)
	for i, caller := range []string{
		`{"kind":"agent","agent_group_id":"{A}","session_id":42}`,
		`{"kind":"host"}`,
		`{"kind":"agent","agent_group_id":"{B}","session_id":"{SA}"}`, // not the hold's group
		`null`,
	} {
		id := w.sub("{A}-d2-") + string(rune('a'+i))
		w.exec(`INSERT INTO holds (id, kind, payload, session_id, agent_group_id, approver_rule, approver_scope) VALUES ('` + id + `', 'cli_command',
			'{"method":"/guard.v1.Registry/AddMember","request":{"group":"{A}","user_id":"telegram:{A}-new"},"caller":` + caller + `}'::jsonb,
			'{SA}', '{A}', 'admins-of-scope', 'group')`)
		if _, err := srv.Deps().Approvals.Resolve(ctx, approvals.Resolution{HoldID: id, Outcome: guardv1.Outcome_OUTCOME_APPROVE, Clicker: owner}); err != nil {
			t.Fatalf("approve: %v", err)
		}
		if n := w.count(`SELECT count(*) FROM agent_group_members`); n != 0 {
			t.Fatalf("caller %s: the command ran", caller)
		}
		texts := notices(t, w, "{SA}")
		if len(texts) != i+1 || !strings.Contains(texts[i], "refused") {
			t.Fatalf("caller %s: requester not told of the refusal: %q", caller, texts)
		}
	}
}

// Issue 13 for server-run replays: an approved admin command whose replay
// the guard cannot decide (the decision log refuses inserts) is not dropped
// with a "failed" notice — nothing ran, the grant is unused, and the hold is
// dispatched again once the guard can decide: the command runs exactly once.
func TestApprovedCommandTheGuardCouldNotDecideRunsLaterOnce(t *testing.T) {
	srv := testserver.Start(t)
	w := newWorld(t, srv)
	owner := withOwner(w)
	w.exec(`INSERT INTO users (id) VALUES ('telegram:{A}-new')`)
	agent := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "runner", w.R, ""), w.SA))
	_, err := agent.Registry.AddMember(ctx, &guardv1.AddMemberRequest{UserId: w.sub("telegram:{A}-new")})
	var hold string
	for _, d := range status.Convert(err).Details() {
		if p, ok := d.(*guardv1.ApprovalPending); ok {
			hold = p.GetHoldId()
		}
	}
	if hold == "" {
		t.Fatalf("AddMember: %v, want a pending approval", err)
	}
	w.exec(`CREATE FUNCTION refuse_log_{A}() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN RAISE EXCEPTION insufficient_privilege USING MESSAGE = 'permission denied for table decisions'; END $$;
		CREATE TRIGGER refuse_log_{A} BEFORE INSERT ON decisions FOR EACH ROW EXECUTE FUNCTION refuse_log_{A}()`)
	if _, err := srv.Deps().Approvals.Resolve(ctx, approvals.Resolution{HoldID: hold,
		Outcome: guardv1.Outcome_OUTCOME_APPROVE, Clicker: owner}); err != nil {
		t.Fatalf("approve: %v", err)
	}
	if n := w.count(`SELECT count(*) FROM agent_group_members WHERE agent_group_id = '{A}'`); n != 0 {
		t.Fatal("the command ran without a logged decision")
	}
	if n := w.count(`SELECT count(*) FROM holds WHERE id = '` + hold + `' AND consumed_at IS NULL AND dispatched_at IS NULL
		AND dispatch_attempts = 1 AND dispatch_after > now()`); n != 1 {
		t.Fatal("the undecided replay was not scheduled again (or its grant was used)")
	}
	for _, text := range notices(t, w, "{SA}") {
		if strings.Contains(text, "failed") {
			t.Fatalf("the requester was told it failed: %q", text)
		}
	}

	w.exec(`DROP TRIGGER refuse_log_{A} ON decisions; DROP FUNCTION refuse_log_{A}();
		UPDATE holds SET dispatch_after = now() WHERE id = '` + hold + `'`)
	if n, err := srv.Deps().Approvals.DispatchMissed(ctx); err != nil || n != 1 {
		t.Fatalf("dispatch again: %d holds (%v), want 1", n, err)
	}
	if n := w.count(`SELECT count(*) FROM agent_group_members WHERE agent_group_id = '{A}' AND user_id = 'telegram:{A}-new'`); n != 1 {
		t.Fatal("the approved command did not run once the guard could decide")
	}
	if n, err := srv.Deps().Approvals.DispatchMissed(ctx); err != nil || n != 0 {
		t.Fatalf("a dispatched hold was dispatched again: %d (%v)", n, err)
	}
	texts := notices(t, w, "{SA}")
	if len(texts) == 0 || !strings.Contains(texts[len(texts)-1], "approved and ran") {
		t.Fatalf("requester not told of the result: %q", texts)
	}
}
