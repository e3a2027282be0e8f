package ncl

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// fakeServer is a real gRPC server on loopback whose answers are scripted,
// for what a healthy real server does not easily produce on demand
// (approval-pending details, dropped streams).
type fakeServer struct {
	guardv1.UnimplementedRegistryServer
	guardv1.UnimplementedApprovalsServer
	guardv1.UnimplementedGuardServer

	mu       sync.Mutex
	last     proto.Message // last request
	auth     []string      // authorization headers seen
	watches  []*guardv1.WatchRequest
	addr     string
	dropOnce bool
}

func startFake(t *testing.T) *fakeServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeServer{addr: l.Addr().String(), dropOnce: true}
	s := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		f.mu.Lock()
		f.auth = append(f.auth, md.Get("authorization")...)
		// Reading names for a table is not the command's request.
		if !strings.HasSuffix(info.FullMethod, "/ListGroups") && !strings.HasSuffix(info.FullMethod, "/ListUsers") {
			f.last = req.(proto.Message)
		}
		f.mu.Unlock()
		return h(ctx, req)
	}))
	guardv1.RegisterRegistryServer(s, f)
	guardv1.RegisterApprovalsServer(s, f)
	guardv1.RegisterGuardServer(s, f)
	go s.Serve(l)
	t.Cleanup(s.Stop)
	return f
}

func (f *fakeServer) lastReq() proto.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

func (f *fakeServer) GetGroup(_ context.Context, req *guardv1.GetGroupRequest) (*guardv1.GetGroupResponse, error) {
	switch req.GetId() {
	case "ag_missing":
		return nil, status.Error(codes.NotFound, "group ag_missing not found")
	case "ag_held":
		st, _ := status.New(codes.FailedPrecondition, "held for approval").WithDetails(&guardv1.ApprovalPending{HoldId: "ho_42", Reason: "needs an admin"})
		return nil, st.Err()
	case "ag_busy":
		return nil, status.Error(codes.Unavailable, "the guard is not wired")
	}
	return &guardv1.GetGroupResponse{Group: &guardv1.Group{Id: req.GetId(), Name: "research"}}, nil
}

func (f *fakeServer) CreateGroup(_ context.Context, req *guardv1.CreateGroupRequest) (*guardv1.CreateGroupResponse, error) {
	return &guardv1.CreateGroupResponse{Group: &guardv1.Group{Id: "ag_new", Name: req.GetName(), Config: &guardv1.GroupConfig{CliScope: req.GetCliScope()}}}, nil
}

func (f *fakeServer) GrantRole(_ context.Context, req *guardv1.GrantRoleRequest) (*guardv1.GrantRoleResponse, error) {
	return &guardv1.GrantRoleResponse{Grant: &guardv1.RoleGrant{UserId: req.GetUserId(), Role: req.GetRole(), Scope: req.GetScope(), Group: req.GetGroup()}}, nil
}

func (f *fakeServer) UpdateMessagingGroup(_ context.Context, req *guardv1.UpdateMessagingGroupRequest) (*guardv1.UpdateMessagingGroupResponse, error) {
	return &guardv1.UpdateMessagingGroupResponse{MessagingGroup: &guardv1.MessagingGroup{Id: req.GetId(), UnknownSenderPolicy: req.GetUnknownSenderPolicy()}}, nil
}

func (f *fakeServer) ListDecisions(context.Context, *guardv1.ListDecisionsRequest) (*guardv1.ListDecisionsResponse, error) {
	return &guardv1.ListDecisionsResponse{}, nil
}

func (f *fakeServer) Decide(_ context.Context, req *guardv1.DecideRequest) (*guardv1.DecideResponse, error) {
	return &guardv1.DecideResponse{Decision: &guardv1.Decision{Effect: guardv1.Effect_EFFECT_DENY, Reason: "no destination", DecidedBy: "baseline"}}, nil
}

func (f *fakeServer) Resolve(_ context.Context, req *guardv1.ResolveRequest) (*guardv1.ResolveResponse, error) {
	return &guardv1.ResolveResponse{Hold: &guardv1.Hold{Id: req.GetId(), Kind: "cli_command", Resolver: req.GetAsUser()}}, nil
}

func (f *fakeServer) ListStandingGrants(context.Context, *guardv1.ListStandingGrantsRequest) (*guardv1.ListStandingGrantsResponse, error) {
	return &guardv1.ListStandingGrantsResponse{Grants: []*guardv1.StandingGrant{{Id: "sg_1", CatalogAction: "a2a.send", ApprovedBy: []string{"telegram:dana"}}}}, nil
}

func (f *fakeServer) RevokeStandingGrant(_ context.Context, req *guardv1.RevokeStandingGrantRequest) (*guardv1.RevokeStandingGrantResponse, error) {
	return &guardv1.RevokeStandingGrantResponse{Grant: &guardv1.StandingGrant{Id: req.GetId(), RevokedBy: "operator"}}, nil
}

// Watch: the first stream sends cursors 1 and 2 then drops (Unavailable);
// later streams send the next cursor and stay open.
func (f *fakeServer) Watch(req *guardv1.WatchRequest, stream grpc.ServerStreamingServer[guardv1.WatchResponse]) error {
	f.mu.Lock()
	f.watches = append(f.watches, proto.Clone(req).(*guardv1.WatchRequest))
	drop := f.dropOnce
	f.dropOnce = false
	f.mu.Unlock()
	ev := func(c int64) *guardv1.WatchResponse {
		return &guardv1.WatchResponse{Cursor: c, Type: guardv1.EventType_EVENT_TYPE_REQUESTED, Hold: &guardv1.Hold{Id: "ho_" + string(rune('0'+c)), Kind: "cli_command"}}
	}
	if drop {
		for _, c := range []int64{1, 2} {
			if err := stream.Send(ev(c)); err != nil {
				return err
			}
		}
		return status.Error(codes.Unavailable, "server shutting down")
	}
	if err := stream.Send(ev(req.GetAfterCursor() + 1)); err != nil {
		return err
	}
	<-stream.Context().Done()
	return nil
}

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func (f *fakeServer) env(t *testing.T) func(string) string {
	return envOf(map[string]string{"CLAWGUARD_SERVER": f.addr, "CLAWGUARD_TOKEN": "cgt_secret", "HOME": t.TempDir()})
}

func TestServerErrors(t *testing.T) {
	f := startFake(t)
	cases := []struct {
		args    []string
		code    int
		stderr  string
		stdoutH string
	}{
		{[]string{"groups", "get", "ag_ok"}, 0, "", "research"},
		{[]string{"groups", "get", "ag_missing"}, 1, "ncl: not found: no group named \"ag_missing\"\n", ""},
		{[]string{"groups", "get", "ag_held"}, 1, "ncl: approval pending: hold ho_42 — approve with: ncl approvals approve ho_42\n", ""},
		{[]string{"groups", "get", "ag_busy"}, 2, "ncl: unavailable: the guard is not wired\n", ""},
		{[]string{"runners", "list"}, 1, "ncl: unimplemented: method ListRunners not implemented\n", ""},
	}
	for _, c := range cases {
		r := runNcl(context.Background(), f.env(t), c.args...)
		if r.code != c.code || r.err != c.stderr || !strings.Contains(r.out, c.stdoutH) {
			t.Errorf("ncl %v = exit %d, stderr %q, stdout %q; want %d, %q, stdout with %q", c.args, r.code, r.err, r.out, c.code, c.stderr, c.stdoutH)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.auth {
		if a != "Bearer cgt_secret" {
			t.Errorf("authorization header %q, want the bearer token", a)
		}
	}
}

func TestRequestsFromFlags(t *testing.T) {
	f := startFake(t)
	env := f.env(t)
	cases := []struct {
		args []string
		want proto.Message
	}{
		{[]string{"groups", "create", "--name", "research", "--cli-scope", "group"},
			&guardv1.CreateGroupRequest{Name: "research", CliScope: guardv1.CliScope_CLI_SCOPE_GROUP}},
		{[]string{"roles", "grant", "--user", "telegram:alice", "--role", "admin", "--scope", "group", "--group", "ag_1"},
			&guardv1.GrantRoleRequest{UserId: "telegram:alice", Role: guardv1.Role_ROLE_ADMIN, Scope: guardv1.RoleScope_ROLE_SCOPE_GROUP, Group: "ag_1"}},
		{[]string{"messaging-groups", "update", "mg_1", "--unknown-sender-policy", "request-approval"},
			&guardv1.UpdateMessagingGroupRequest{Id: "mg_1", UnknownSenderPolicy: guardv1.SenderPolicy_SENDER_POLICY_REQUEST_APPROVAL}},
		{[]string{"approvals", "approve", "ho_1", "--as", "telegram:dana"},
			&guardv1.ResolveRequest{Id: "ho_1", Outcome: guardv1.Outcome_OUTCOME_APPROVE, AsUser: "telegram:dana"}},
		{[]string{"approvals", "approve", "ho_1", "--for", "90m"},
			&guardv1.ResolveRequest{Id: "ho_1", Outcome: guardv1.Outcome_OUTCOME_APPROVE, StandingFor: durationpb.New(90 * time.Minute)}},
		{[]string{"approvals", "approve", "ho_1", "--for-session"},
			&guardv1.ResolveRequest{Id: "ho_1", Outcome: guardv1.Outcome_OUTCOME_APPROVE, StandingSession: true}},
		{[]string{"grants", "revoke", "sg_1"}, &guardv1.RevokeStandingGrantRequest{Id: "sg_1"}},
		{[]string{"grants", "list", "--all"}, &guardv1.ListStandingGrantsRequest{IncludeEnded: true}},
		{[]string{"approvals", "reject", "ho_1", "--reason", "not now"},
			&guardv1.ResolveRequest{Id: "ho_1", Outcome: guardv1.Outcome_OUTCOME_REJECT, Reason: "not now"}},
		{[]string{"decisions", "list", "--effect", "deny", "--action", "a2a.send", "--limit", "5"},
			&guardv1.ListDecisionsRequest{Effect: guardv1.Effect_EFFECT_DENY, Action: "a2a.send", Limit: 5}},
	}
	for _, c := range cases {
		r := runNcl(context.Background(), env, c.args...)
		if r.code != 0 {
			t.Errorf("ncl %v: exit %d: %s", c.args, r.code, r.err)
			continue
		}
		if got := f.lastReq(); !proto.Equal(got, c.want) {
			t.Errorf("ncl %v sent %v, want %v", c.args, got, c.want)
		}
	}

	// explain: actor, resources and payload, always a dry run.
	r := runNcl(context.Background(), env, "explain", "--action", "a2a.send", "--actor", "agent:ag_A:se_1",
		"--resource", "to=ag_B", "--payload", `{"text":"hi"}`, "-o", "json")
	if r.code != 0 {
		t.Fatalf("explain: %d %s", r.code, r.err)
	}
	d := f.lastReq().(*guardv1.DecideRequest)
	if !d.GetDryRun() || d.GetActor().GetAgent().GetAgentGroupId() != "ag_A" || d.GetActor().GetAgent().GetSessionId() != "se_1" ||
		d.GetResource()["to"] != "ag_B" || d.GetPayload().GetFields()["text"].GetStringValue() != "hi" {
		t.Errorf("explain sent %v", d)
	}
	if !strings.Contains(r.out, `"effect": "deny"`) {
		t.Errorf("explain -o json: %s", r.out)
	}
	runNcl(context.Background(), env, "explain", "--action", "x", "--actor", "human:telegram:dana")
	if u := f.lastReq().(*guardv1.DecideRequest).GetActor().GetHuman().GetUserId(); u != "telegram:dana" {
		t.Errorf("human actor = %q, want telegram:dana", u)
	}
}

// TestWatchResumes: after the stream drops, watch reconnects from the last
// cursor it printed, so nothing is lost or repeated.
func TestWatchResumes(t *testing.T) {
	f := startFake(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		code := Run(ctx, []string{"approvals", "watch", "-q"}, pw, io.Discard, f.env(t))
		pw.Close()
		done <- code
	}()
	sc := bufio.NewScanner(pr)
	var got []string
	for len(got) < 3 && sc.Scan() {
		got = append(got, sc.Text())
	}
	if strings.Join(got, ",") != "ho_1,ho_2,ho_3" {
		t.Errorf("watch printed %v, want ho_1, ho_2, ho_3", got)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("interrupted watch exit %d, want 0", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not stop on cancel")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.watches) != 2 || !f.watches[0].GetFromNow() || f.watches[1].GetFromNow() || f.watches[1].GetAfterCursor() != 2 {
		t.Errorf("watch requests = %v, want from_now then after_cursor 2", f.watches)
	}
}

func TestUsageAndExitCodes(t *testing.T) {
	home := t.TempDir()
	noServer := envOf(map[string]string{"CLAWGUARD_SERVER": "127.0.0.1:1", "CLAWGUARD_TOKEN": "t", "HOME": home})
	noToken := envOf(map[string]string{"HOME": home})
	cases := []struct {
		args   []string
		env    func(string) string
		code   int
		stderr string
	}{
		{nil, noToken, 0, ""},
		{[]string{"bogus"}, noToken, 2, `unknown command "bogus"`},
		{[]string{"groups"}, noToken, 2, "needs a verb"},
		{[]string{"groups", "frobnicate"}, noToken, 2, `unknown verb "frobnicate"`},
		{[]string{"groups", "get"}, noToken, 2, "exactly one argument"},
		{[]string{"groups", "create"}, noToken, 2, `required flag(s) "name" not set`},
		{[]string{"groups", "create", "--name", "x", "--cli-scope", "wide"}, noToken, 2, "want one of: disabled, group, global"},
		{[]string{"roles", "grant", "--user", "u", "--role", "admin", "--scope", "group"}, noToken, 2, "--scope group needs --group"},
		{[]string{"roles", "grant", "--user", "u", "--role", "admin", "--scope", "global", "--group", "g"}, noToken, 2, "--scope global takes no --group"},
		{[]string{"roles", "grant", "--user", "u", "--role", "admin"}, noToken, 2, `required flag(s) "scope" not set`},
		{[]string{"destinations", "add", "--group", "a", "--name", "b"}, noToken, 2, "target-group"},
		{[]string{"approvals", "reject", "h", "--reason", strings.Repeat("x", 281)}, noToken, 2, "at most 280"},
		{[]string{"explain", "--action", "a2a.send", "--actor", "robot"}, noToken, 2, "want host, agent:"},
		{[]string{"explain", "--action", "a2a.send", "--actor", "host", "--payload", "[1]"}, noToken, 2, "not a JSON object"},
		{[]string{"decisions", "list", "--since", "yesterday"}, noToken, 2, "--since"},
		{[]string{"-o", "xml", "groups", "list"}, noToken, 2, "want table, wide, json or yaml"},
		{[]string{"-o", "yaml", "-q", "groups", "list"}, noToken, 2, "-q and -o yaml are exclusive"},
		{[]string{"approvals", "list", "--status", "bogus"}, noToken, 2, "want one of: pending, approved, rejected, expired, swept, resolved, all"},
		{[]string{"--token", "x", "groups", "list"}, noToken, 2, "unknown flag: --token"},
		{[]string{"tokens", "create", "--kind", "user", "--name", "d", "-q"}, noToken, 2, "--secret-file"},
		{[]string{"groups", "list"}, noToken, 2, "no token"},
		{[]string{"groups", "list"}, noServer, 2, "cannot reach server 127.0.0.1:1"},
		{[]string{"completion", "powershell"}, noToken, 2, "bash, zsh or fish"},
		{[]string{"config", "use-context", "nope"}, noToken, 2, `profile "nope" not found`},
	}
	for _, c := range cases {
		r := runNcl(context.Background(), c.env, c.args...)
		if r.code != c.code || !strings.Contains(r.err, c.stderr) {
			t.Errorf("ncl %q = exit %d, stderr %q; want %d with %q", c.args, r.code, r.err, c.code, c.stderr)
		}
		if c.code == 2 && strings.Count(strings.TrimSpace(r.err), "\n") > 1 {
			t.Errorf("ncl %q: error is not one line (+ hint): %q", c.args, r.err)
		}
	}
}

// exampleID finds id-like words of help examples; realID is the shape of
// the ids the server mints (resources.newID, guard.newID).
var (
	exampleID = regexp.MustCompile(`\b(ag|hold|sess|mg|mga|tok|wr|dec|ho)_[A-Za-z0-9]+\b`)
	realID    = regexp.MustCompile(`^((ag|mg|mga|tok|wr)_[0-9a-f]{16}|(hold|sess)_[0-9a-f]{20}|dec_[0-9a-f]{28})$`)
)

// TestEveryCommandHasHelpAndExample: --help works on every level and shows
// an example.
func TestEveryCommandHasHelpAndExample(t *testing.T) {
	a := &app{stdout: io.Discard, stderr: io.Discard, getenv: envOf(nil)}
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" {
			return
		}
		n++
		if c.Example == "" {
			t.Errorf("%s has no example", c.CommandPath())
		}
		// Ids in examples have the shape the server mints (ag_ + 16 hex, ...).
		for _, id := range exampleID.FindAllString(c.Example, -1) {
			if !realID.MatchString(id) {
				t.Errorf("%s: example id %q has not the shape of a real id", c.CommandPath(), id)
			}
		}
		if f := c.Flags().Lookup("status"); f != nil && strings.Contains(f.Usage, "pending") && !strings.Contains(f.Usage, "all") {
			t.Errorf("%s --status help does not list all: %q", c.CommandPath(), f.Usage)
		}
		args := append(strings.Fields(c.CommandPath())[1:], "--help")
		r := runNcl(context.Background(), envOf(nil), args...)
		if r.code != 0 || !strings.Contains(r.out, "Examples:") {
			t.Errorf("ncl %s: exit %d, no Examples in help", strings.Join(args, " "), r.code)
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(a.rootCmd())
	if n < 60 {
		t.Errorf("walked %d commands, expected the whole tree", n)
	}
}

func (f *fakeServer) CreateToken(_ context.Context, req *guardv1.CreateTokenRequest) (*guardv1.CreateTokenResponse, error) {
	return &guardv1.CreateTokenResponse{Token: &guardv1.Token{Id: "tok_1", Kind: req.GetKind(), Name: req.GetName(), UserId: req.GetUserId()}, Secret: "cgt_s3cret"}, nil
}

// TestTokenSecretShownOnce: every way of creating a token hands the secret
// over exactly once, and -q never loses it.
func TestTokenSecretShownOnce(t *testing.T) {
	f := startFake(t)
	env := f.env(t)
	base := []string{"tokens", "create", "--kind", "user", "--name", "dana", "--user", "telegram:dana"}
	r := runNcl(context.Background(), env, base...)
	if r.code != 0 || !strings.Contains(r.out, "SECRET: cgt_s3cret") || !strings.Contains(r.out, "tok_1") {
		t.Errorf("table: %d %q", r.code, r.out)
	}
	r = runNcl(context.Background(), env, append(base, "-o", "json")...)
	if !strings.Contains(r.out, `"secret": "cgt_s3cret"`) || !strings.Contains(r.out, `"id": "tok_1"`) || !strings.Contains(r.out, `"kind": "user"`) {
		t.Errorf("json: %q", r.out)
	}
	r = runNcl(context.Background(), env, append(base, "--secret-only")...)
	if r.out != "cgt_s3cret\n" {
		t.Errorf("--secret-only printed %q", r.out)
	}
	file := filepath.Join(t.TempDir(), "dana.token")
	r = runNcl(context.Background(), env, append(base, "--secret-file", file, "-q")...)
	b, err := os.ReadFile(file)
	st, _ := os.Stat(file)
	if r.out != "tok_1\n" || err != nil || string(b) != "cgt_s3cret\n" || st.Mode().Perm() != 0o600 {
		t.Errorf("--secret-file -q: out %q, file %q (%v), mode %v", r.out, b, err, st.Mode())
	}
	if req := f.lastReq().(*guardv1.CreateTokenRequest); req.GetKind() != guardv1.Principal_PRINCIPAL_USER || req.GetUserId() != "telegram:dana" {
		t.Errorf("sent %v", req)
	}
}
