// Package authn turns a bearer token into a principal: operator, runner,
// bridge or user. Tokens are stored as SHA-256 hashes. A runner may further
// assert an agent by naming a session it hosts in the x-clawguard-session
// header; the server checks the runner really hosts it.
package authn

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clawguard/clawguard/server/internal/store"

	"github.com/clawguard/clawguard/server/internal/fault"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/singleflight"
	"google.golang.org/grpc/metadata"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// SessionHeader is the metadata key a runner uses to act for an agent.
const SessionHeader = "x-clawguard-session"

// TokenPrefix marks Clawguard secrets so they are recognisable in leaks.
const TokenPrefix = "cgt_"

// Principal is an authenticated caller.
type Principal struct {
	Kind     guardv1.Principal
	TokenID  string
	RunnerID string // runner tokens: the one runner id they may act as
	UserID   string // user tokens: the user they act as
	// Runner tokens: the placement identity the operator gave the runner.
	// Neither set = an unbound token (only unpinned groups are placed on it).
	Host   string
	Labels map[string]string
	// Bridge tokens: the channel namespaces the bridge speaks for. None = it
	// asserts nobody (a token minted before bindings existed).
	Channels []string
}

// Bound says a runner token carries a placement identity.
func (p Principal) Bound() bool { return p.Host != "" || len(p.Labels) > 0 }

// Namespace is the channel namespace of a user id ("telegram" of
// "telegram:dana"); "" when the id is not namespaced.
func Namespace(userID string) string {
	ns, _, ok := strings.Cut(userID, ":")
	if !ok {
		return ""
	}
	return ns
}

// SpeaksFor says a bridge may assert userID: a user of one of its
// channel namespaces. A bridge without channels speaks for nobody.
func (p Principal) SpeaksFor(userID string) bool {
	ns := Namespace(userID)
	return ns != "" && p.SpeaksForChannel(ns)
}

// SpeaksForChannel says a bridge may route chats of channel.
func (p Principal) SpeaksForChannel(channel string) bool {
	return channel != "" && slices.Contains(p.Channels, channel)
}

// Agent is an agent asserted by a runner.
type Agent struct {
	GroupID   string
	SessionID string
}

// Caller is who is calling: a principal and, for runners acting for an
// agent, the agent.
type Caller struct {
	Principal Principal
	Agent     *Agent
	// Via names the surface a person used when it is not the token's own
	// (the console runs its users' calls in-process): "console", else "".
	Via string
	// SignedIn is when a console session's user signed in (zero
	// otherwise): a step-up wants a recent one.
	SignedIn time.Time
}

// Actor is the guard actor of the caller: operator → host, runner with an
// agent → agent, user → human. Bridges and bare runners act as the system
// until they name a user or an agent.
func (c Caller) Actor() *guardv1.Actor {
	switch {
	case c.Principal.Kind == guardv1.Principal_PRINCIPAL_OPERATOR:
		return &guardv1.Actor{Kind: &guardv1.Actor_Host{Host: &guardv1.HostActor{}}}
	case c.Agent != nil:
		return &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: c.Agent.GroupID, SessionId: c.Agent.SessionID}}}
	case c.Principal.Kind == guardv1.Principal_PRINCIPAL_USER:
		return &guardv1.Actor{Kind: &guardv1.Actor_Human{Human: &guardv1.HumanActor{UserId: c.Principal.UserID}}}
	default:
		return &guardv1.Actor{Kind: &guardv1.Actor_System{System: &guardv1.SystemActor{}}}
	}
}

type callerKey struct{}

// WithCaller stores the caller in a context.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// FromContext returns the authenticated caller; ok is false for
// unauthenticated contexts (health, reflection).
func FromContext(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// Hash is how tokens are stored.
func Hash(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// NewSecret makes a random token secret.
func NewSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("read random: %w", err)
	}
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// Authenticator resolves tokens against the tokens table, with a short cache
// so the hot path (Decide) costs no extra round trip; a revocation takes
// effect within cacheTTL on every replica. Misses are single-flight: when
// an entry expires under load, the calls in flight for that token share
// one query instead of each sending its own.
type Authenticator struct {
	pool     *pgxpool.Pool
	cacheTTL time.Duration
	mu       sync.RWMutex
	cache    map[string]cached
	lookups  singleflight.Group
	queries  atomic.Int64 // tokens-table queries sent (tests)
}

type cached struct {
	p       Principal
	err     error
	expires time.Time
}

// NewAuthenticator builds an Authenticator.
func NewAuthenticator(pool *pgxpool.Pool) *Authenticator {
	return &Authenticator{pool: pool, cacheTTL: 2 * time.Second, cache: map[string]cached{}}
}

// Authenticate is the go-grpc-middleware auth function: it reads the bearer
// token and, for runners, the asserted session.
func (a *Authenticator) Authenticate(ctx context.Context) (context.Context, error) {
	token, err := bearer(ctx)
	if err != nil {
		return nil, err
	}
	p, err := a.principal(ctx, token)
	if err != nil {
		return nil, err
	}
	caller := Caller{Principal: p}
	if sess := metadataValue(ctx, SessionHeader); sess != "" {
		if p.Kind != guardv1.Principal_PRINCIPAL_RUNNER {
			return nil, fault.New(fault.Denied, "only runners may act for an agent session")
		}
		agent, err := a.agentFor(ctx, p.RunnerID, sess)
		if err != nil {
			return nil, err
		}
		caller.Agent = agent
	}
	return WithCaller(ctx, caller), nil
}

// AgentFor checks that runnerID hosts sessionID and returns the agent.
func (a *Authenticator) agentFor(ctx context.Context, runnerID, sessionID string) (*Agent, error) {
	var group, owner string
	err := a.pool.QueryRow(ctx, `SELECT agent_group_id, COALESCE(runner_id, '') FROM sessions WHERE id = $1`, sessionID).Scan(&group, &owner)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && owner != runnerID) {
		// One answer for "no such session" and "another runner's session":
		// no existence oracle across runners.
		return nil, fault.New(fault.Denied, "runner %q does not host session %q", runnerID, sessionID)
	}
	if err != nil {
		return nil, fmt.Errorf("check session owner: %w", err) // mapped at the edge (api.Status)
	}
	return &Agent{GroupID: group, SessionID: sessionID}, nil
}

func (a *Authenticator) principal(ctx context.Context, token string) (Principal, error) {
	a.mu.RLock()
	c, ok := a.cache[token]
	a.mu.RUnlock()
	if ok && time.Now().Before(c.expires) {
		return c.p, c.err
	}
	// The shared lookup runs on a context of its own (bounded, not the first
	// caller's) so one caller giving up does not fail the others; each caller
	// still stops waiting when its own context ends.
	ch := a.lookups.DoChan(token, func() (any, error) {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return a.lookup(lctx, token)
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return Principal{}, r.Err
		}
		c := r.Val.(cached)
		return c.p, c.err
	case <-ctx.Done():
		return Principal{}, ctx.Err()
	}
}

// lookup reads one token and caches the answer (a known token's principal,
// or its refusal). An outage is returned as the error and never cached: the
// next call asks again (fail closed).
func (a *Authenticator) lookup(ctx context.Context, token string) (cached, error) {
	now := time.Now()
	a.queries.Add(1)
	var (
		p                Principal
		kind             string
		runnerID, userID *string
		revoked, expires *time.Time
		lastUsed         *time.Time
		labels           []byte
	)
	err := a.pool.QueryRow(ctx,
		`SELECT id, kind, runner_id, user_id, revoked_at, expires_at, last_used_at, host, labels, channels FROM tokens WHERE hash = $1`, Hash(token),
	).Scan(&p.TokenID, &kind, &runnerID, &userID, &revoked, &expires, &lastUsed, &p.Host, &labels, &p.Channels)
	keep := now.Add(a.cacheTTL)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		err = fault.New(fault.Unauthenticated, "unknown token")
	case err != nil:
		return cached{}, fmt.Errorf("authenticate: %w", err) // mapped at the edge (api.Status)
	case revoked != nil:
		err = fault.New(fault.Unauthenticated, "token revoked")
	case expires != nil && !now.Before(*expires):
		err = fault.New(fault.Unauthenticated, "token %s expired at %s: ask for a new one", p.TokenID, expires.UTC().Format(time.RFC3339))
	default:
		if expires != nil && expires.Before(keep) {
			// Accepted from the cache no longer than until it expires: the
			// expiry holds to the instant on every replica.
			keep = *expires
		}
		a.touch(p.TokenID, lastUsed, now)
		if p.Kind, err = enumword.Parse[guardv1.Principal](kind); err != nil || p.Kind == 0 {
			return cached{}, fault.New(fault.Internal, "token %s: kind %q: %v", p.TokenID, kind, err)
		}
		if runnerID != nil {
			p.RunnerID = *runnerID
		}
		if userID != nil {
			p.UserID = *userID
		}
		if err = json.Unmarshal(labels, &p.Labels); err != nil {
			return cached{}, fault.New(fault.Internal, "token %s labels: %v", p.TokenID, err)
		}
		if len(p.Labels) == 0 {
			p.Labels = nil
		}
	}
	c := cached{p: p, err: err, expires: keep}
	a.mu.Lock()
	if len(a.cache) > 10000 {
		a.cache = map[string]cached{}
	}
	a.cache[token] = c
	a.mu.Unlock()
	return c, nil
}

// lastUsedEvery is how stale a token's last_used_at may be: it is written at
// most this often per token and replica.
const lastUsedEvery = time.Minute

// touch records that the token was accepted now, when its last_used_at is
// older than lastUsedEvery. It runs only on a cache miss (at most once per
// cacheTTL per token) and writes off the request's path: a failed write
// costs the time shown, never the request.
func (a *Authenticator) touch(tokenID string, lastUsed *time.Time, now time.Time) {
	if lastUsed != nil && now.Sub(*lastUsed) < lastUsedEvery {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = a.pool.Exec(ctx, `UPDATE tokens SET last_used_at = now()
			WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - make_interval(secs => $2))`, tokenID, lastUsedEvery.Seconds())
	}()
}

func bearer(ctx context.Context) (string, error) {
	v := metadataValue(ctx, "authorization")
	if v == "" {
		return "", fault.New(fault.Unauthenticated, "missing bearer token (authorization: Bearer <token>)")
	}
	scheme, token, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || token == "" {
		return "", fault.New(fault.Unauthenticated, "malformed authorization header, want \"Bearer <token>\"")
	}
	return strings.TrimSpace(token), nil
}

// metadataValue is a request header's first value ("" when absent), read
// without copying the others.
func metadataValue(ctx context.Context, key string) string {
	if v := metadata.ValueFromIncomingContext(ctx, key); len(v) > 0 {
		return v[0]
	}
	return ""
}

// EnsureOperatorToken makes the token in file an operator token: created
// (0600) with a fresh secret on first start, registered idempotently.
func EnsureOperatorToken(ctx context.Context, pool *pgxpool.Pool, file string) error {
	secret, err := ReadOrCreateSecret(file)
	if err != nil {
		return err
	}
	return RegisterToken(ctx, pool, "operator-file", "operator", "operator token file "+filepath.Base(file), secret, "", "")
}

// RegisterToken stores a token's hash under a fixed id (idempotent: the
// operator token file's, registered at every start).
func RegisterToken(ctx context.Context, pool *pgxpool.Pool, id, kind, name, secret, runnerID, userID string) error {
	_, err := pool.Exec(ctx, `
		INSERT INTO tokens (id, kind, name, hash, runner_id, user_id)
		VALUES ($1, $2, $3, $4, NULLIF($5, ''), NULLIF($6, ''))
		ON CONFLICT (id) DO UPDATE SET hash = EXCLUDED.hash, revoked_at = NULL
		  WHERE tokens.kind = EXCLUDED.kind`,
		id, kind, name, Hash(secret), runnerID, userID)
	if err != nil {
		return fmt.Errorf("register %s token: %w", kind, err)
	}
	return nil
}

// NewToken is a token to store: only its secret's hash is kept. A runner
// token carries its runner id and placement (host, labels), a user token
// its user, a bridge token its channel namespaces.
type NewToken struct {
	Kind, Name, Secret string
	RunnerID, UserID   string
	Host               string
	Labels             map[string]string
	Channels           []string
	ExpiresIn          time.Duration // 0 = until revoked
}

// StoreToken stores a new token and returns its id. This package owns the
// tokens table: tokens are stored, registered and revoked here, and read
// here to authenticate.
func StoreToken(ctx context.Context, q store.Querier, t NewToken) (string, error) {
	labels, err := json.Marshal(t.Labels)
	if err != nil {
		return "", fmt.Errorf("encode labels: %w", err)
	}
	if t.Labels == nil {
		labels = []byte(`{}`)
	}
	channels := t.Channels
	if channels == nil {
		channels = []string{}
	}
	id := store.NewID("tok_", 8)
	var expiresIn *string // an interval after the row's own created_at
	if t.ExpiresIn > 0 {
		e := fmt.Sprintf("%d milliseconds", t.ExpiresIn.Milliseconds())
		expiresIn = &e
	}
	_, err = q.Exec(ctx, `INSERT INTO tokens (id, kind, name, hash, runner_id, user_id, host, labels, channels, expires_at)
		VALUES ($1, $2, $3, $4, NULLIF($5, ''), NULLIF($6, ''), $7, $8, $9, now() + $10::interval)`,
		id, t.Kind, t.Name, Hash(t.Secret), t.RunnerID, t.UserID, t.Host, labels, channels, expiresIn)
	if err != nil {
		return "", fmt.Errorf("store %s token: %w", t.Kind, err)
	}
	return id, nil
}

// RevokeToken revokes a token (its first revocation's time stays); found
// false when there is no such token.
func RevokeToken(ctx context.Context, q store.Querier, id string) (found bool, err error) {
	tag, err := q.Exec(ctx, `UPDATE tokens SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1`, id)
	if err != nil {
		return false, fmt.Errorf("revoke token %s: %w", id, err)
	}
	return tag.RowsAffected() > 0, nil
}

// ReadOrCreateSecret reads the operator token file, creating it (0600)
// with a fresh secret on first start.
func ReadOrCreateSecret(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err == nil {
		s := strings.TrimSpace(string(b))
		if s == "" {
			return "", fmt.Errorf("operator token file %s is empty", file)
		}
		return s, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read operator token file: %w", err)
	}
	secret, err := NewSecret()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return "", fmt.Errorf("create token dir: %w", err)
	}
	if err := os.WriteFile(file, []byte(secret+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write operator token file: %w", err)
	}
	return secret, nil
}
