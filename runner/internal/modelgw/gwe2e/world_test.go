package gwe2e

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/egress"
	"github.com/clawguard/clawguard/runner/internal/modelgw"
	"github.com/clawguard/clawguard/runner/internal/modelgw/fakeprovider"
)

const owner = "telegram:dana"

// world is a server, a group research given an anthropic and an openai
// provider (the fake one, over TLS), sessions s1 and s2 on runner r1, and
// the runner's gateway serving each session's socket.
type world struct {
	t        testing.TB
	srv      *server
	group    string
	provider *fakeprovider.Provider
	gw       *modelgw.Gateway
	proxy    *egress.Proxy
	dirs     map[string]string // session → the directory of its socket
	tokens   map[string]string // session → its token
}

func newWorld(t testing.TB, limits modelgw.Limits) *world {
	t.Helper()
	ctx := context.Background()
	srv := startServer(t)
	w := &world{t: t, srv: srv, dirs: map[string]string{}, tokens: map[string]string{}}
	g, err := srv.op.registry.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: "research"})
	if err != nil {
		t.Fatal(err)
	}
	w.group = g.GetGroup().GetId()
	if _, err := srv.op.registry.CreateUser(ctx, &guardv1.CreateUserRequest{Id: owner}); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.op.registry.GrantRole(ctx, &guardv1.GrantRoleRequest{UserId: owner, Role: guardv1.Role_ROLE_OWNER, Scope: guardv1.RoleScope_ROLE_SCOPE_GLOBAL}); err != nil {
		t.Fatal(err)
	}
	ca := fakeprovider.NewCA(t)
	w.provider = fakeprovider.New(t, ca)
	for _, p := range []*guardv1.SetModelProviderRequest{
		{Name: "anthropic", Kind: guardv1.ModelProviderKind_MODEL_PROVIDER_KIND_ANTHROPIC, BaseUrl: w.provider.URL, Credential: ptr(w.provider.Keys["anthropic"])},
		{Name: "openai", Kind: guardv1.ModelProviderKind_MODEL_PROVIDER_KIND_OPENAI, BaseUrl: w.provider.URL, Credential: ptr(w.provider.Keys["openai"])},
	} {
		if _, err := srv.op.registry.SetModelProvider(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := srv.op.registry.SetModelProviders(ctx, &guardv1.SetModelProvidersRequest{Group: w.group, Providers: []string{"anthropic", "openai"}}); err != nil {
		t.Fatal(err)
	}
	srv.exec(t, `INSERT INTO runners (id, host, lease_expires_at) VALUES ('r1', 'h', now() + interval '1 hour')`)
	srv.exec(t, `INSERT INTO sessions (id, agent_group_id, runner_id) VALUES ('s1', $1, 'r1'), ('s2', $1, 'r1')`, w.group)
	transport, err := modelgw.ProviderTransport(ca.Bundle)
	if err != nil {
		t.Fatal(err)
	}
	w.gw, err = modelgw.New(modelgw.Config{
		Guard: &modelgw.GuardClient{DecideFunc: func(ctx context.Context, req *guardv1.DecideRequest) (*guardv1.DecideResponse, error) {
			return srv.runner.guard.Decide(ctx, req)
		}, Approvals: srv.runner.approvals},
		Models: srv.runner.registry, Transport: transport, Limits: limits, Log: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	w.proxy, err = egress.New(egress.Config{Decider: noEgress{}, Awaiter: noEgress{}, Policy: &egress.AddressPolicy{}, Limits: egress.DefaultLimits,
		Log: slog.New(slog.DiscardHandler), Origin: w.gw.Handler})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"s1", "s2"} {
		w.open(s)
	}
	return w
}

func ptr(s string) *string { return &s }

type noEgress struct{}

func (noEgress) Connect(context.Context, egress.Session, egress.Dest) (egress.Verdict, error) {
	return egress.Verdict{Effect: guardv1.Effect_EFFECT_DENY, Reason: "no egress in this test"}, nil
}

func (noEgress) Await(context.Context, string, time.Duration) (egress.Resolution, error) {
	return egress.Resolution{}, nil
}

// open serves a session's socket (readable by the container's user) and
// mints its token, as the runner does when a session's endpoints are served.
func (w *world) open(session string) {
	dir, err := os.MkdirTemp("", "cgm")
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	sock := filepath.Join(dir, "egress.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		w.t.Fatal(err)
	}
	os.Chmod(sock, 0o666)
	w.tokens[session] = w.gw.Open(session)
	w.proxy.Serve(egress.Session{ID: session, GroupID: w.group}, ln)
	w.t.Cleanup(func() { w.proxy.Stop(session, "test over") })
	w.dirs[session] = dir
}

// client is an HTTP client on a session's socket (what clawguard-init's
// forwarder does in the container).
func (w *world) client(session string) *http.Client {
	sock := filepath.Join(w.dirs[session], "egress.sock")
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
}

const base = "http://127.0.0.1:3128"

// anthropic is the SDK as a session's agent has it, retries off (a test
// counts each call).
func (w *world) anthropic(session string) *anthropic.Client {
	c := anthropic.NewClient(aoption.WithoutEnvironmentDefaults(), aoption.WithBaseURL(base), aoption.WithAuthToken(w.tokens[session]),
		aoption.WithHTTPClient(w.client(session)), aoption.WithMaxRetries(0))
	return &c
}

// usage is the group's usage as the operator reads it, by provider/model.
func (w *world) usage() map[string]*guardv1.ModelUsage {
	resp, err := w.srv.op.registry.ListModelUsage(context.Background(), &guardv1.ListModelUsageRequest{Group: w.group})
	if err != nil {
		w.t.Fatal(err)
	}
	out := map[string]*guardv1.ModelUsage{}
	for _, u := range resp.GetUsage() {
		out[u.GetProvider()+"/"+u.GetModel()] = u
	}
	return out
}
