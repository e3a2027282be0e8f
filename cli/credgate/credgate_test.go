package credgate_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/clawguard/clawguard/cli/credgate"
	"github.com/clawguard/clawguard/cli/internal/clitest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Every test runs clawguard-server built from this tree, on loopback, over
// a fresh Postgres database; the gateway uses a bridge token, as a
// credential gateway would.

func TestMain(m *testing.M) { os.Exit(clitest.Main(m)) }

func TestApprovedByTheGroupsAdmin(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	got := f.ask(ctx, credgate.Request{AgentGroupID: f.group, Question: "Use the GitHub token to open an issue?",
		Payload: map[string]any{"credential": "github", "method": "POST", "host": "api.github.com", "path": "/repos/acme/app/issues"}})
	h := f.pending(t)
	if h.GetKind() != credgate.Kind || h.GetTitle() != "Credential use" ||
		h.GetPayload().GetFields()["host"].GetStringValue() != "api.github.com" {
		t.Fatalf("credential hold = %v", h)
	}
	deadline, _ := ctx.Deadline()
	if exp := h.GetExpiresAt().AsTime(); exp.After(deadline.Add(-credgate.DefaultMargin+time.Second)) || exp.Before(deadline.Add(-credgate.DefaultMargin-time.Second)) {
		t.Fatalf("hold expires at %s, want %s before the deadline %s", exp, credgate.DefaultMargin, deadline)
	}
	f.resolve(t, h.GetId(), guardv1.Outcome_OUTCOME_APPROVE, "")
	d := got.wait(t)
	if d.err != nil || !d.Allowed() || d.Outcome != credgate.Approved || d.HoldID != h.GetId() || d.Resolver != f.owner {
		t.Fatalf("decision = %+v, err %v; want approve by %s", d.Decision, d.err, f.owner)
	}
}

func TestRejectedWithAReason(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	got := f.ask(ctx, credgate.Request{AgentGroupID: f.group, Question: "Use the AWS key?", Payload: map[string]any{"credential": "aws"}})
	h := f.pending(t)
	f.resolve(t, h.GetId(), guardv1.Outcome_OUTCOME_REJECT, "not against production")
	d := got.wait(t)
	if d.err != nil || d.Allowed() || d.Outcome != credgate.Rejected || d.Reason != "not against production" || d.Resolver != f.owner {
		t.Fatalf("decision = %+v, err %v; want reject with the reason", d.Decision, d.err)
	}
}

// Nobody answers: the hold expires a margin before the gateway's own
// deadline, and the gateway hears "expire" from the server in time.
func TestExpiresJustBeforeTheGatewaysDeadline(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := credgate.New(f.conn)
	c.Margin = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()
	d, err := c.Ask(ctx, credgate.Request{AgentGroupID: f.group, Question: "Use the npm token?"})
	if err != nil || d.Outcome != credgate.Expired || d.Allowed() {
		t.Fatalf("decision = %+v, err %v; want expire", d, err)
	}
	if time.Now().After(deadline) {
		t.Fatal("the expire answer came after the gateway's deadline")
	}
	h := f.get(t, d.HoldID)
	if h.GetStatus() != guardv1.HoldStatus_HOLD_STATUS_EXPIRED || !h.GetExpiresAt().AsTime().Before(deadline) {
		t.Fatalf("hold = %v", h)
	}
}

// The server restarts while the gateway waits: the new server sweeps the
// pending credential hold and the waiting gateway is told so.
func TestSweptWhenTheServerRestarts(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	got := f.ask(ctx, credgate.Request{AgentGroupID: f.group, Question: "Use the Slack token?"})
	h := f.pending(t)
	f.srv.Restart(t)
	d := got.wait(t)
	if d.err != nil || d.Outcome != credgate.Swept || d.Allowed() || d.HoldID != h.GetId() {
		t.Fatalf("decision = %+v, err %v; want sweep", d.Decision, d.err)
	}
	if h := f.get(t, h.GetId()); h.GetStatus() != guardv1.HoldStatus_HOLD_STATUS_SWEPT {
		t.Fatalf("hold after restart = %v", h.GetStatus())
	}
}

// Fail closed: no deadline, a deadline inside the margin, or a server that
// never answers — no credential use, and no hold left behind needlessly.
func TestRefusesWithoutATimelyAnswer(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := credgate.New(f.conn)
	if _, err := c.Ask(context.Background(), credgate.Request{AgentGroupID: f.group}); !errors.Is(err, credgate.ErrNoDeadline) {
		t.Fatalf("no deadline: %v", err)
	}
	short, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if d, err := c.Ask(short, credgate.Request{AgentGroupID: f.group}); err == nil || d.Allowed() {
		t.Fatalf("deadline inside the margin: %+v %v", d, err)
	}
	if n := len(f.list(t)); n != 0 {
		t.Fatalf("%d holds created by refused asks", n)
	}
	// An unknown session is the caller's mistake, said clearly.
	ctx, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	if _, err := c.Ask(ctx, credgate.Request{AgentGroupID: f.group, SessionID: "sess_nope"}); err == nil || !strings.Contains(err.Error(), "InvalidArgument") {
		t.Fatalf("unknown session: %v, want InvalidArgument", err)
	}
	// The server goes away for good: the gateway's deadline passes undecided.
	f.srv.Stop()
	gone, cancel3 := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel3()
	c.Margin = time.Second
	if d, err := c.Ask(gone, credgate.Request{AgentGroupID: f.group}); err == nil || d.Allowed() {
		t.Fatalf("server down: %+v %v, want an error", d, err)
	}
}

// ---- harness ----

type fixture struct {
	srv   *clitest.Server
	conn  *grpc.ClientConn // bridge token: the gateway
	op    *grpc.ClientConn // operator: the approver's side
	group string
	owner string
}

func setup(t *testing.T) *fixture {
	t.Helper()
	s := clitest.Start(t)
	op := s.Operator(t)
	reg := guardv1.NewRegistryClient(op)
	ctx := context.Background()
	f := &fixture{srv: s, op: op, owner: "telegram:olivia"}
	if _, err := reg.CreateUser(ctx, &guardv1.CreateUserRequest{Id: f.owner}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.GrantRole(ctx, &guardv1.GrantRoleRequest{UserId: f.owner, Role: guardv1.Role_ROLE_OWNER, Scope: guardv1.RoleScope_ROLE_SCOPE_GLOBAL}); err != nil {
		t.Fatal(err)
	}
	g, err := reg.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: "agents", CliScope: guardv1.CliScope_CLI_SCOPE_GROUP})
	if err != nil {
		t.Fatal(err)
	}
	f.group = g.GetGroup().GetId()
	f.conn = s.Dial(t, s.Token(t, &guardv1.CreateTokenRequest{Kind: guardv1.Principal_PRINCIPAL_BRIDGE, Name: "credential-gateway"}))
	return f
}

type answer struct {
	credgate.Decision
	err error
}

type pendingAsk chan answer

func (f *fixture) ask(ctx context.Context, req credgate.Request) pendingAsk {
	ch := make(pendingAsk, 1)
	go func() {
		d, err := credgate.New(f.conn).Ask(ctx, req)
		ch <- answer{d, err}
	}()
	return ch
}

func (p pendingAsk) wait(t *testing.T) answer {
	t.Helper()
	select {
	case a := <-p:
		return a
	case <-time.After(90 * time.Second):
		t.Fatal("Ask never returned")
		return answer{}
	}
}

func (f *fixture) list(t *testing.T) []*guardv1.Hold {
	t.Helper()
	res, err := guardv1.NewApprovalsClient(f.op).List(context.Background(), &guardv1.ListRequest{Kind: credgate.Kind})
	if err != nil {
		t.Fatal(err)
	}
	return res.GetHolds()
}

// pending waits for the one credential hold to be pending.
func (f *fixture) pending(t *testing.T) *guardv1.Hold {
	t.Helper()
	var h *guardv1.Hold
	clitest.WaitFor(t, 30*time.Second, "the credential hold", func() bool {
		hs := f.list(t)
		if len(hs) == 1 && hs[0].GetStatus() == guardv1.HoldStatus_HOLD_STATUS_PENDING {
			h = hs[0]
		}
		return h != nil
	})
	return h
}

func (f *fixture) get(t *testing.T, id string) *guardv1.Hold {
	t.Helper()
	res, err := guardv1.NewApprovalsClient(f.op).Get(context.Background(), &guardv1.GetRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	return res.GetHold()
}

func (f *fixture) resolve(t *testing.T, id string, o guardv1.Outcome, reason string) {
	t.Helper()
	_, err := guardv1.NewApprovalsClient(f.op).Resolve(context.Background(), &guardv1.ResolveRequest{Id: id, Outcome: o, AsUser: f.owner, Reason: reason})
	if err != nil {
		t.Fatalf("resolve %s %s: %v", id, o, err)
	}
}
