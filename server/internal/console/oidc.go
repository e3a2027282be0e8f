package console

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/jackc/pgx/v5"
	"golang.org/x/oauth2"

	"github.com/clawguard/clawguard/server/internal/store"
)

// OIDCCookie carries one sign-in attempt's state, nonce and PKCE verifier
// from /signin/oidc to its callback. SameSite=Lax: the callback is a
// top-level navigation from the provider's site, which a Strict cookie
// would not reach. It is scoped to the sign-in paths and lives 10 minutes.
const OIDCCookie = "cg_oidc"

const oidcPath = "/signin/oidc"

// OIDCConfig is the console's OIDC client (--oidc-*).
type OIDCConfig struct {
	Issuer       string
	ClientID     string
	ClientSecret string
	RedirectURL  string
	// HTTPClient talks to the provider (nil = http.DefaultClient).
	HTTPClient *http.Client
}

// oidcClient discovers the provider on first use and again after a failed
// discovery, so a provider down at start-up does not keep the server down.
type oidcClient struct {
	cfg OIDCConfig

	mu       sync.Mutex
	oauth    *oauth2.Config
	verifier *oidc.IDTokenVerifier
}

func (o *oidcClient) ctx(ctx context.Context) context.Context {
	if o.cfg.HTTPClient != nil {
		return oidc.ClientContext(ctx, o.cfg.HTTPClient)
	}
	return ctx
}

func (o *oidcClient) provider(ctx context.Context) (*oauth2.Config, *oidc.IDTokenVerifier, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.oauth != nil {
		return o.oauth, o.verifier, nil
	}
	dctx, cancel := context.WithTimeout(o.ctx(ctx), 10*time.Second)
	defer cancel()
	// NewProvider checks that the discovery document names this issuer.
	p, err := oidc.NewProvider(dctx, o.cfg.Issuer)
	if err != nil {
		return nil, nil, err
	}
	o.oauth = &oauth2.Config{ClientID: o.cfg.ClientID, ClientSecret: o.cfg.ClientSecret, RedirectURL: o.cfg.RedirectURL,
		Endpoint: p.Endpoint(), Scopes: []string{oidc.ScopeOpenID}}
	// The verifier checks the signature against the provider's keys, the
	// issuer, the audience (our client id) and the expiry.
	o.verifier = p.Verifier(&oidc.Config{ClientID: o.cfg.ClientID})
	return o.oauth, o.verifier, nil
}

// oidcStart sends the browser to the provider: a fresh state (the callback
// must bring it back), nonce (the ID token must carry it) and PKCE verifier,
// kept in the attempt's cookie.
func (c *Console) oidcStart(w http.ResponseWriter, r *http.Request) {
	conf, _, err := c.oidc.provider(r.Context())
	if err != nil {
		c.d.Log.Warn("OIDC discovery failed", "issuer", c.oidc.cfg.Issuer, "err", err)
		c.fail(w, r, nil, http.StatusServiceUnavailable, "the identity provider cannot be reached now: try again, or sign in with a user token")
		return
	}
	state, nonce, verifier := randomToken(), randomToken(), oauth2.GenerateVerifier()
	next := c.afterSignIn(r.URL.Query().Get("next"))
	val := strings.Join([]string{state, nonce, verifier, base64.RawURLEncoding.EncodeToString([]byte(next))}, ".")
	http.SetCookie(w, &http.Cookie{Name: OIDCCookie, Value: val, Path: oidcPath, HttpOnly: true, Secure: c.d.Secure,
		SameSite: http.SameSiteLaxMode, MaxAge: int((10 * time.Minute).Seconds())})
	http.Redirect(w, r, conf.AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)), http.StatusSeeOther)
}

// oidcRefused is a sign-in the console did not accept: an audit line, and
// a page that says why and what to do. Nothing is signed in.
func (c *Console) oidcRefused(w http.ResponseWriter, r *http.Request, code int, why, page string) {
	c.d.Log.Info("console OIDC sign-in refused", "audit", true, "issuer", c.oidc.cfg.Issuer, "why", why)
	c.fail(w, r, nil, code, page)
}

// oidcCallback finishes a sign-in: the attempt's cookie, the state, the
// code exchanged with the PKCE verifier, the ID token verified and its
// nonce checked, then the (issuer, subject) binding → a console session.
func (c *Console) oidcCallback(w http.ResponseWriter, r *http.Request) {
	ck, err := r.Cookie(OIDCCookie)
	// One attempt, one callback: the cookie goes whatever happens next.
	http.SetCookie(w, &http.Cookie{Name: OIDCCookie, Path: oidcPath, HttpOnly: true, Secure: c.d.Secure, SameSite: http.SameSiteLaxMode, MaxAge: -1})
	again := "Sign in again from the sign-in page."
	if err != nil {
		c.oidcRefused(w, r, http.StatusForbidden, "callback without its sign-in cookie", "this sign-in was not started here or took longer than 10 minutes. "+again)
		return
	}
	parts := strings.Split(ck.Value, ".")
	if len(parts) != 4 {
		c.oidcRefused(w, r, http.StatusForbidden, "malformed sign-in cookie", "this sign-in's cookie is damaged. "+again)
		return
	}
	state, nonce, verifier := parts[0], parts[1], parts[2]
	nextRaw, _ := base64.RawURLEncoding.DecodeString(parts[3])
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		c.oidcRefused(w, r, http.StatusForbidden, "provider answered "+e, "the identity provider did not sign you in ("+e+"). "+again)
		return
	}
	if !tokenEqual(q.Get("state"), state) {
		c.oidcRefused(w, r, http.StatusForbidden, "state mismatch", "this sign-in's answer does not belong to the sign-in this browser started. "+again)
		return
	}
	conf, idv, err := c.oidc.provider(r.Context())
	if err != nil {
		c.fail(w, r, nil, http.StatusServiceUnavailable, "the identity provider cannot be reached now: try again")
		return
	}
	ctx, cancel := context.WithTimeout(c.oidc.ctx(r.Context()), 15*time.Second)
	defer cancel()
	tok, err := conf.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		c.oidcRefused(w, r, http.StatusForbidden, "code exchange failed: "+err.Error(), "the identity provider did not accept this sign-in's code. "+again)
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		c.oidcRefused(w, r, http.StatusForbidden, "token response without an ID token", "the identity provider sent no ID token. "+again)
		return
	}
	idt, err := idv.Verify(ctx, raw)
	if err != nil {
		c.oidcRefused(w, r, http.StatusForbidden, "ID token not accepted: "+err.Error(), "the identity provider's ID token was not accepted. "+again)
		return
	}
	if !tokenEqual(idt.Nonce, nonce) {
		c.oidcRefused(w, r, http.StatusForbidden, "nonce mismatch", "the ID token was not issued for this sign-in. "+again)
		return
	}
	// Only the binding an operator made maps the identity; the token's
	// email or name is never consulted.
	var user string
	err = c.d.Pool.QueryRow(r.Context(), `SELECT user_id FROM oidc_bindings WHERE issuer = $1 AND subject = $2`, idt.Issuer, idt.Subject).Scan(&user)
	if errors.Is(err, pgx.ErrNoRows) {
		c.d.Log.Info("console OIDC sign-in refused", "audit", true, "issuer", idt.Issuer, "subject", idt.Subject, "why", "no user is bound to this subject")
		c.fail(w, r, nil, http.StatusForbidden, fmt.Sprintf("you signed in at the identity provider as subject %q, but no Clawguard user is bound to it. "+
			"An operator can bind it: ncl users bind-oidc <user> --issuer %s --subject %s", idt.Subject, idt.Issuer, idt.Subject))
		return
	}
	if err != nil {
		c.failRPC(w, r, nil, store.Fault("OIDC binding", err))
		return
	}
	id := randomToken()
	_, err = c.d.Pool.Exec(r.Context(), `WITH gone AS (DELETE FROM console_sessions WHERE expires_at < now())
		INSERT INTO console_sessions (id_hash, user_id, csrf, expires_at, oidc_issuer, oidc_subject) VALUES ($1, $2, $3, $4, $5, $6)`,
		hashID(id), user, randomToken(), c.now().Add(c.d.SessionTTL), idt.Issuer, idt.Subject)
	if err != nil {
		c.failRPC(w, r, nil, store.Fault("console session", err))
		return
	}
	c.d.Log.Info("console sign-in", "user", user, "oidc_issuer", idt.Issuer, "oidc_subject", idt.Subject)
	http.SetCookie(w, c.cookie(SessionCookie, id, c.d.SessionTTL))
	// A page, not a redirect: this request came from the provider's site,
	// and a redirect would carry that on, so the browser would withhold
	// the SameSite=Strict session cookie from the next page.
	c.render(w, r, http.StatusOK, "signedin", nil, "Signed in", c.afterSignIn(string(nextRaw)))
}

// oidcPrincipal is the token id an OIDC session's calls carry: no token
// exists, so it names the binding (request ids are scoped by it).
func oidcPrincipal(issuer, subject string) string {
	h := sha256.Sum256([]byte(issuer + "\x00" + subject))
	return "oidc:" + hex.EncodeToString(h[:8])
}
