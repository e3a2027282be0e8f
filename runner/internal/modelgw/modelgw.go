// Package modelgw is the runner's model gateway (issue 44): the endpoint
// an agent's ANTHROPIC_BASE_URL and OPENAI_BASE_URL name, served over the
// session's egress socket (the origin-form requests egress.Config.Origin
// hands it). The provider's credential never enters the container: the
// agent holds a per-session token, worthless outside its session, and the
// gateway forwards each call to the provider with the real key.
//
// Every call is a model.call decision on its provider and model. An
// allowed call reserves its worst case (its output bound plus an upper
// bound of its input) against the group's budget before it is forwarded;
// past the budget it asks model.budget, which the group's setting holds for
// an approver or denies. The response is streamed as it comes (server-sent
// events unbuffered), its usage counted from the provider's own fields on
// the way, and the reservation settled once at the end — a cut stream with
// what was seen, the missing output at its reserved bound. Refusals come in
// the provider's error shape, so the agent's SDK raises a clear error.
package modelgw

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/egress"
)

// Guard decides a call (Guard.DecideStream on the runner) and waits a
// while for a hold's answer (Approvals.Await).
type Guard interface {
	Decide(ctx context.Context, req *guardv1.DecideRequest) (*guardv1.DecideResponse, error)
	Await(ctx context.Context, holdID string, wait time.Duration) (egress.Resolution, error)
}

// Models is the server's side of the gateway: a session's route (with the
// provider's credential), reservations and settlements (a Registry client).
type Models interface {
	GetModelRoute(ctx context.Context, in *guardv1.GetModelRouteRequest, opts ...grpc.CallOption) (*guardv1.GetModelRouteResponse, error)
	ReserveModelUsage(ctx context.Context, in *guardv1.ReserveModelUsageRequest, opts ...grpc.CallOption) (*guardv1.ReserveModelUsageResponse, error)
	SettleModelUsage(ctx context.Context, in *guardv1.SettleModelUsageRequest, opts ...grpc.CallOption) (*guardv1.SettleModelUsageResponse, error)
}

// Limits are the gateway's bounds.
type Limits struct {
	// MaxBody is the largest request body (Anthropic's own limit is 32 MB).
	MaxBody int64
	// DefaultOutput is the output bound of a call that sets none, written
	// into its body so the provider cannot produce more than was reserved;
	// MaxOutput the largest a call may set.
	DefaultOutput, MaxOutput int64
	// InputOverhead is added to a body's size for what a provider adds to
	// the input of its own (a tool-use system prompt).
	InputOverhead int64
	// HoldWait is how long a held call waits for its approval before it is
	// answered 429 naming the hold.
	HoldWait time.Duration
	// RouteTTL is how long a session's route (provider and credential) is
	// kept: a rotated credential is used within it.
	RouteTTL time.Duration
}

// Validate refuses limits the gateway cannot work with.
func (l Limits) Validate() error {
	switch {
	case l.MaxBody < 1<<10:
		return fmt.Errorf("the largest request body must be at least 1 KiB, not %d bytes", l.MaxBody)
	case l.DefaultOutput < 1 || l.MaxOutput < l.DefaultOutput:
		return fmt.Errorf("the default output bound (%d) must be at least 1 and at most the largest (%d)", l.DefaultOutput, l.MaxOutput)
	case l.InputOverhead < 0 || l.HoldWait < 0 || l.RouteTTL < 0:
		return errors.New("the input overhead, the hold wait and the route TTL are not negative")
	}
	return nil
}

// DefaultLimits are the runner's defaults.
var DefaultLimits = Limits{MaxBody: 32 << 20, DefaultOutput: 8192, MaxOutput: 1 << 20, InputOverhead: 1024,
	HoldWait: 20 * time.Second, RouteTTL: 5 * time.Second}

// Config is the gateway's.
type Config struct {
	Guard  Guard
	Models Models
	// Transport reaches the providers (the runner's CA bundle); nil: a
	// clone of http.DefaultTransport.
	Transport http.RoundTripper
	Limits    Limits
	Metrics   *Metrics // nil: none
	Log       *slog.Logger
	// Names, when set, names a group for the approver's card.
	Names func(groupID string) string
}

// Gateway serves every session's model endpoint on the runner.
type Gateway struct {
	cfg    Config
	routes *routeCache

	mu     sync.RWMutex
	tokens map[string]string // session id → its token
}

// New checks the configuration and returns the gateway.
func New(cfg Config) (*Gateway, error) {
	if cfg.Guard == nil || cfg.Models == nil {
		return nil, errors.New("modelgw: a guard and the server's model RPCs are required")
	}
	if cfg.Limits == (Limits{}) {
		cfg.Limits = DefaultLimits
	}
	if cfg.Transport == nil {
		cfg.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Gateway{cfg: cfg, routes: newRouteCache(cfg.Models, cfg.Limits.RouteTTL), tokens: map[string]string{}}, nil
}

// Open mints a session's token (32 random bytes, hex) as its endpoints are
// served, replacing the one it had: the container's ANTHROPIC_AUTH_TOKEN
// and OPENAI_API_KEY (Env).
func (g *Gateway) Open(sessionID string) string {
	var b [32]byte
	rand.Read(b[:])
	tok := hex.EncodeToString(b[:])
	g.mu.Lock()
	g.tokens[sessionID] = tok
	g.mu.Unlock()
	return tok
}

// Close forgets a session's token (its session stopped): every later call
// with it is refused.
func (g *Gateway) Close(sessionID string) {
	g.mu.Lock()
	delete(g.tokens, sessionID)
	g.mu.Unlock()
	g.routes.forget(sessionID)
}

// authorized reports whether a request carries the session's current
// token, in whichever header its SDK sends: every auth header it sends
// must be that token, and one must be there.
func (g *Gateway) authorized(sessionID string, r *http.Request) bool {
	g.mu.RLock()
	tok, ok := g.tokens[sessionID]
	g.mu.RUnlock()
	if !ok {
		return false
	}
	var given []string
	if k := r.Header.Values("X-Api-Key"); len(k) > 0 {
		given = append(given, k...)
	}
	for _, a := range r.Header.Values("Authorization") {
		bearer, found := cutPrefixFold(a, "Bearer ")
		if !found {
			return false
		}
		given = append(given, bearer)
	}
	if len(given) == 0 {
		return false
	}
	for _, v := range given {
		if subtle.ConstantTimeCompare([]byte(v), []byte(tok)) != 1 {
			return false
		}
	}
	return true
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) < len(prefix) || !strings.EqualFold(s[:len(prefix)], prefix) {
		return "", false
	}
	return s[len(prefix):], true
}

// Env is what a session's agent is given: the base URLs of the gateway at
// base (the in-container forwarder, http://127.0.0.1:3128, or the process
// runtime's listener) and its token as each SDK's key; ANTHROPIC_API_KEY is
// set empty so the Anthropic SDKs send the token as a bearer.
func Env(base, token string) map[string]string {
	return map[string]string{
		"ANTHROPIC_BASE_URL":   base,
		"ANTHROPIC_AUTH_TOKEN": token,
		"ANTHROPIC_API_KEY":    "",
		"OPENAI_BASE_URL":      base + "/v1",
		"OPENAI_API_KEY":       token,
	}
}

// Handler serves one session's model calls (egress.Config.Origin).
func (g *Gateway) Handler(s egress.Session) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { g.serve(w, r, s) })
}
