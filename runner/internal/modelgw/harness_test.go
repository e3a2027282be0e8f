package modelgw

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/modelrule"
	"github.com/clawguard/clawguard/runner/internal/egress"
	"github.com/clawguard/clawguard/runner/internal/modelgw/fakeprovider"
)

// These tests are about the gateway: its guard and the server's model RPCs
// are tables of answers (the real decisions, reservations and settlements
// are tested on the server, in modelcalls and metering, and end to end in
// runner/internal/e2e). The provider, the TLS, the socket and the SDKs are
// real.

// fakeGuard answers model.call by model and model.budget by a setting.
type fakeGuard struct {
	mu        sync.Mutex
	effects   map[string]guardv1.Effect // model → effect; missing: allow
	budget    guardv1.Effect            // model.budget's answer
	approve   bool                      // a hold is approved during the wait
	down      bool                      // Decide fails
	asked     []*guardv1.DecideRequest
	approved  map[string]bool // hold → approved
	decisions int
}

func (g *fakeGuard) Decide(_ context.Context, req *guardv1.DecideRequest) (*guardv1.DecideResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.down {
		return nil, status.Error(codes.Unavailable, "the server is down")
	}
	g.asked = append(g.asked, req)
	g.decisions++
	key := req.GetResource()[modelrule.KeyModel]
	e, ok := g.effects[key]
	if req.GetAction() == modelrule.BudgetAction {
		key, e, ok = "budget:"+req.GetResource()[modelrule.KeyBudget], g.budget, true
	}
	if !ok {
		e = guardv1.Effect_EFFECT_ALLOW
	}
	hold := "hold_" + key
	if e == guardv1.Effect_EFFECT_HOLD && g.approved[hold] {
		delete(g.approved, hold) // used once
		e = guardv1.Effect_EFFECT_ALLOW
	}
	resp := &guardv1.DecideResponse{DecisionId: fmt.Sprintf("dec_%d", g.decisions),
		Decision: &guardv1.Decision{Effect: e, Reason: "fake rule for " + key}}
	if e == guardv1.Effect_EFFECT_HOLD {
		resp.HoldId = hold
		resp.Decision.ApproverRule = &guardv1.ApproverRule{Kind: &guardv1.ApproverRule_AdminsOfScope{AdminsOfScope: &guardv1.AdminsOfScope{AgentGroupId: "ag_research"}}}
	}
	return resp, nil
}

func (g *fakeGuard) Await(_ context.Context, holdID string, _ time.Duration) (egress.Resolution, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.approve {
		return egress.Resolution{}, nil // still pending when the wait ends
	}
	g.approved[holdID] = true
	return egress.Resolution{Resolved: true, Outcome: guardv1.Outcome_OUTCOME_APPROVE, Resolver: "telegram:dana"}, nil
}

func (g *fakeGuard) requests() []*guardv1.DecideRequest {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]*guardv1.DecideRequest(nil), g.asked...)
}

// fakeModels routes each kind to the fake provider, reserves (over budget
// when told, until a model.budget decision is cited) and counts settles.
type fakeModels struct {
	mu         sync.Mutex
	routes     map[guardv1.ModelProviderKind]*guardv1.GetModelRouteResponse
	overBudget bool
	reserves   []*guardv1.ReserveModelUsageRequest
	settles    []*guardv1.SettleModelUsageRequest
	settled    map[string]int // reservation → settles that counted
	changed    chan struct{}
}

func (m *fakeModels) GetModelRoute(_ context.Context, in *guardv1.GetModelRouteRequest, _ ...grpc.CallOption) (*guardv1.GetModelRouteResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.routes[in.GetKind()]; ok {
		return r, nil
	}
	return &guardv1.GetModelRouteResponse{}, nil
}

func (m *fakeModels) ReserveModelUsage(_ context.Context, in *guardv1.ReserveModelUsageRequest, _ ...grpc.CallOption) (*guardv1.ReserveModelUsageResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reserves = append(m.reserves, in)
	if m.overBudget && in.GetOverBudgetDecisionId() == "" {
		return &guardv1.ReserveModelUsageResponse{OverBudget: true, Budget: &guardv1.ModelBudget{Period: guardv1.ModelBudgetPeriod_MODEL_BUDGET_PERIOD_DAY,
			Tokens: 1000, SpentTokens: 990}, PeriodUsage: []*guardv1.ModelUsage{{Provider: "anthropic", Model: "claude-sonnet-4-5", Calls: 3, InputTokens: 900, OutputTokens: 90}}}, nil
	}
	return &guardv1.ReserveModelUsageResponse{ReservationId: in.GetDecisionId()}, nil
}

func (m *fakeModels) SettleModelUsage(_ context.Context, in *guardv1.SettleModelUsageRequest, _ ...grpc.CallOption) (*guardv1.SettleModelUsageResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.settles = append(m.settles, in)
	first := m.settled[in.GetReservationId()] == 0
	m.settled[in.GetReservationId()]++
	select {
	case m.changed <- struct{}{}:
	default:
	}
	return &guardv1.SettleModelUsageResponse{Settled: first}, nil
}

// settlesOf waits for n settles (the gateway settles off the call's path).
func (m *fakeModels) settlesOf(t *testing.T, n int) []*guardv1.SettleModelUsageRequest {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		m.mu.Lock()
		got := append([]*guardv1.SettleModelUsageRequest(nil), m.settles...)
		m.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-m.changed:
		case <-deadline:
			t.Fatalf("%d settles, want %d", len(got), n)
		}
	}
}

func (m *fakeModels) reservations() []*guardv1.ReserveModelUsageRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*guardv1.ReserveModelUsageRequest(nil), m.reserves...)
}

// rig is a gateway served on two sessions' egress sockets.
type rig struct {
	t        *testing.T
	gw       *Gateway
	guard    *fakeGuard
	models   *fakeModels
	provider *fakeprovider.Provider
	proxy    *egress.Proxy
	socks    map[string]string // session → its socket
	tokens   map[string]string // session → its token
	metrics  *prometheus.Registry
}

type noEgress struct{}

func (noEgress) Connect(context.Context, egress.Session, egress.Dest) (egress.Verdict, error) {
	return egress.Verdict{Effect: guardv1.Effect_EFFECT_DENY, Reason: "not this test"}, nil
}

func (noEgress) Await(context.Context, string, time.Duration) (egress.Resolution, error) {
	return egress.Resolution{}, nil
}

func newRig(t *testing.T, limits Limits) *rig {
	t.Helper()
	ca := fakeprovider.NewCA(t)
	p := fakeprovider.New(t, ca)
	r := &rig{t: t, provider: p, socks: map[string]string{}, tokens: map[string]string{}, metrics: prometheus.NewRegistry(),
		guard: &fakeGuard{effects: map[string]guardv1.Effect{}, approved: map[string]bool{}, budget: guardv1.Effect_EFFECT_HOLD},
		models: &fakeModels{settled: map[string]int{}, changed: make(chan struct{}, 1), routes: map[guardv1.ModelProviderKind]*guardv1.GetModelRouteResponse{
			guardv1.ModelProviderKind_MODEL_PROVIDER_KIND_ANTHROPIC: {Provider: "anthropic", BaseUrl: p.URL, Credential: p.Keys["anthropic"], HasBudget: true},
			guardv1.ModelProviderKind_MODEL_PROVIDER_KIND_OPENAI:    {Provider: "openai", BaseUrl: p.URL, Credential: p.Keys["openai"], HasBudget: true},
		}}}
	transport, err := ProviderTransport(ca.Bundle)
	if err != nil {
		t.Fatal(err)
	}
	r.gw, err = New(Config{Guard: r.guard, Models: r.models, Transport: transport, Limits: limits,
		Metrics: NewMetrics(r.metrics), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	r.proxy, err = egress.New(egress.Config{Decider: noEgress{}, Awaiter: noEgress{}, Policy: &egress.AddressPolicy{}, Limits: egress.DefaultLimits,
		Log: slog.New(slog.DiscardHandler), Origin: r.gw.Handler})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"s1", "s2"} {
		r.open(s)
	}
	return r
}

// open serves a session's socket and mints its token, as the runner does
// when a session's endpoints are served.
func (r *rig) open(session string) {
	sock := filepath.Join(r.t.TempDir(), "egress.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		r.t.Fatal(err)
	}
	r.tokens[session] = r.gw.Open(session)
	r.proxy.Serve(egress.Session{ID: session, GroupID: "ag_research"}, ln)
	r.t.Cleanup(func() { r.proxy.Stop(session, "test over") })
	r.socks[session] = sock
}

// client is an HTTP client whose every connection is the session's socket
// (what clawguard-init's forwarder does in the container).
func (r *rig) client(session string) *http.Client {
	sock := r.socks[session]
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
}

// base is the base URL the agent's SDKs are given (any host: the socket
// is the only way there).
const base = "http://127.0.0.1:3128"
