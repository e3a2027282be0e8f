package console_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/config"
)

// idp is a local OIDC provider: discovery, JWKS, an authorization endpoint
// that signs in whoever the test says (no login form) and a token endpoint
// that checks the code, the client secret and the PKCE verifier and signs
// an ID token with a test RSA key.
type idp struct {
	t      *testing.T
	srv    *httptest.Server
	key    *rsa.PrivateKey
	client string
	secret string

	mu      sync.Mutex
	subject string            // who signs in next
	codes   map[string]grant  // issued codes
	tamper  func(*jwt.Claims) // changes the next ID token's claims
	nonceTo string            // when set, the next ID token's nonce
	signer  *rsa.PrivateKey   // when set, signs instead of key
}

type grant struct{ subject, nonce, challenge, redirect string }

type idClaims struct {
	jwt.Claims
	Nonce string `json:"nonce,omitempty"`
}

func newIdP(t *testing.T) *idp {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := &idp{t: t, key: key, client: "clawguard-console", secret: "s3cret", codes: map[string]grant{}}
	m := http.NewServeMux()
	m.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		u := p.srv.URL
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": u, "authorization_endpoint": u + "/authorize",
			"token_endpoint": u + "/token", "jwks_uri": u + "/keys", "response_types_supported": []string{"code"},
			"subject_types_supported": []string{"public"}, "id_token_signing_alg_values_supported": []string{"RS256"}})
	})
	m.HandleFunc("GET /keys", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	})
	m.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("client_id") != p.client || q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" ||
			q.Get("code_challenge") == "" || q.Get("nonce") == "" || !strings.Contains(q.Get("scope"), "openid") {
			http.Error(w, "bad authorization request: "+r.URL.RawQuery, http.StatusBadRequest)
			return
		}
		p.mu.Lock()
		code := rand.Text()
		p.codes[code] = grant{subject: p.subject, nonce: q.Get("nonce"), challenge: q.Get("code_challenge"), redirect: q.Get("redirect_uri")}
		p.mu.Unlock()
		http.Redirect(w, r, q.Get("redirect_uri")+"?"+url.Values{"code": {code}, "state": {q.Get("state")}}.Encode(), http.StatusFound)
	})
	m.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		id, secret, ok := r.BasicAuth()
		if !ok {
			id, secret = r.PostFormValue("client_id"), r.PostFormValue("client_secret")
		}
		p.mu.Lock()
		g, found := p.codes[r.PostFormValue("code")]
		delete(p.codes, r.PostFormValue("code"))
		tamper, nonce, signer := p.tamper, p.nonceTo, p.signer
		p.mu.Unlock()
		sum := sha256.Sum256([]byte(r.PostFormValue("code_verifier")))
		if id != p.client || secret != p.secret || !found || r.PostFormValue("redirect_uri") != g.redirect ||
			base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
			return
		}
		c := idClaims{Claims: jwt.Claims{Issuer: p.srv.URL, Subject: g.subject, Audience: jwt.Audience{p.client},
			IssuedAt: jwt.NewNumericDate(time.Now()), Expiry: jwt.NewNumericDate(time.Now().Add(5 * time.Minute))}, Nonce: g.nonce}
		if tamper != nil {
			tamper(&c.Claims)
		}
		if nonce != "" {
			c.Nonce = nonce
		}
		if signer == nil {
			signer = key
		}
		sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: signer, KeyID: "k1"}}, nil)
		if err != nil {
			p.t.Error(err)
			return
		}
		raw, err := jwt.Signed(sig).Claims(c).Serialize()
		if err != nil {
			p.t.Error(err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "at", "token_type": "Bearer", "expires_in": 300, "id_token": raw})
	})
	p.srv = httptest.NewServer(m)
	t.Cleanup(p.srv.Close)
	return p
}

func (p *idp) set(f func(p *idp)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(p)
}

// consoleRedirect is the callback URL the console registers at the
// provider; the test's browser sends the callback to the real console.
const consoleRedirect = "http://console.test/signin/oidc/callback"

// startSSO is the console fixture with OIDC sign-in through p.
func startSSO(t *testing.T, p *idp, logW *lockedBuffer) *fixture {
	secret := filepath.Join(t.TempDir(), "oidc-secret")
	if err := os.WriteFile(secret, []byte(p.secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opt := func(c *config.Config) {
		c.OIDCIssuer, c.OIDCClientID, c.OIDCClientSecretFile, c.OIDCRedirectURL = p.srv.URL, p.client, secret, consoleRedirect
	}
	if logW == nil {
		return startWith(t, nil, opt)
	}
	return startWith(t, logW, opt)
}

// ssoAttempt drives the redirect flow up to the callback: the console's
// redirect to the provider, the provider's redirect back. It returns the
// callback's path and query, for the test to send (or tamper with).
func (b *browser) ssoAttempt(next string) string {
	b.t.Helper()
	resp, _ := b.get("/signin/oidc?next=" + url.QueryEscape(next))
	if resp.StatusCode != http.StatusSeeOther {
		b.t.Fatalf("/signin/oidc: %d", resp.StatusCode)
	}
	if ck := cookieNamed(resp, "cg_oidc"); ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode {
		b.t.Fatalf("attempt cookie: %+v", ck)
	}
	resp, err := b.c.Get(resp.Header.Get("Location"))
	if err != nil {
		b.t.Fatal(err)
	}
	resp.Body.Close()
	back, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusFound || err != nil || "http://"+back.Host+back.Path != consoleRedirect {
		b.t.Fatalf("provider's answer: %d %q %v", resp.StatusCode, resp.Header.Get("Location"), err)
	}
	return back.Path + "?" + back.RawQuery
}

// ssoSignIn signs in through the provider and lands on next; it returns
// the landing page's CSRF token.
func (b *browser) ssoSignIn(next string) string {
	b.t.Helper()
	resp, body := b.get(b.ssoAttempt(next))
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `<meta http-equiv="refresh" content="0;url=`+next) {
		b.t.Fatalf("callback: %d\n%s", resp.StatusCode, body)
	}
	if ck := cookieNamed(resp, "cg_session"); ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode {
		b.t.Fatalf("session cookie: %+v", ck)
	}
	resp, page := b.get(next)
	if resp.StatusCode != http.StatusOK {
		b.t.Fatalf("%s after SSO: %d", next, resp.StatusCode)
	}
	return csrfOf(b.t, page)
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Issue 34: an approver bound by the operator signs in through the
// identity provider and resolves a step-up hold (an OIDC sign-in is a fresh
// sign-in); unbinding ends the session.
func TestAnApproverSignsInWithSSOAndResolvesAStepUpHold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newIdP(t)
	f := startSSO(t, p, nil)
	op := f.srv.Operator(t).Registry
	if _, err := op.SetActionSettings(ctx, &guardv1.SetActionSettingsRequest{Action: "a2a.send", StepUp: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := op.BindOidc(ctx, &guardv1.BindOidcRequest{UserId: "telegram:dana", Issuer: p.srv.URL, Subject: "dana-at-idp"}); err != nil {
		t.Fatal(err)
	}
	// Bound to Dana, the subject cannot be bound to another user as well.
	if _, err := op.BindOidc(ctx, &guardv1.BindOidcRequest{UserId: "telegram:eve", Issuer: p.srv.URL, Subject: "dana-at-idp"}); err == nil {
		t.Fatal("a subject bound to Dana was bound to Eve too")
	}
	u, err := op.GetUser(ctx, &guardv1.GetUserRequest{Id: "telegram:dana"})
	if err != nil || len(u.GetUser().GetOidcBindings()) != 1 || u.GetUser().GetOidcBindings()[0].GetSubject() != "dana-at-idp" {
		t.Fatalf("GetUser's bindings: %v %v", u, err)
	}

	dana := newBrowser(t, f.base)
	_, signin := dana.get("/signin")
	if !strings.Contains(signin, "Sign in with SSO") {
		t.Fatalf("sign-in page offers no SSO:\n%s", signin)
	}
	hold := f.ask(t, "needs a step-up").GetHoldId()
	p.set(func(p *idp) { p.subject = "dana-at-idp" })
	csrf := dana.ssoSignIn("/holds/" + hold)
	resp, body := dana.post("/holds/"+hold+"/resolve", url.Values{"csrf": {csrf}, "outcome": {"approve"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve after SSO: %d\n%s", resp.StatusCode, body)
	}
	var st, by string
	if err := f.srv.Pool.QueryRow(ctx, `SELECT status, resolver FROM holds WHERE id = $1`, hold).Scan(&st, &by); err != nil || st != "approved" || by != "telegram:dana" {
		t.Fatalf("hold after the SSO approval: %s by %s %v", st, by, err)
	}

	// The binding gone, the session it made is gone with it.
	if _, err := op.UnbindOidc(ctx, &guardv1.UnbindOidcRequest{UserId: "telegram:dana", Issuer: p.srv.URL, Subject: "dana-at-idp"}); err != nil {
		t.Fatal(err)
	}
	if resp, _ := dana.get("/holds"); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/signin") {
		t.Fatalf("/holds after unbinding: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// Issue 34: nobody is signed in by a guess. An unbound subject, a callback
// whose state is not this browser's, one without the attempt's cookie, an
// ID token with another nonce, from another issuer or signed by another
// key: each is refused, and no session exists.
func TestSSOSignInsThatAreRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newIdP(t)
	var logs lockedBuffer
	f := startSSO(t, p, &logs)
	if _, err := f.srv.Operator(t).Registry.BindOidc(ctx, &guardv1.BindOidcRequest{UserId: "telegram:dana", Issuer: p.srv.URL, Subject: "dana-at-idp"}); err != nil {
		t.Fatal(err)
	}
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	refusedWith := func(t *testing.T, b *browser, callback, want string) {
		t.Helper()
		resp, body := b.get(callback)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, want) {
			t.Fatalf("callback: %d, want 403 saying %q\n%s", resp.StatusCode, want, body)
		}
		if ck := cookieNamed(resp, "cg_session"); ck != nil {
			t.Fatalf("a refused sign-in set a session cookie")
		}
		if resp, _ := b.get("/holds"); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("/holds after a refused sign-in: %d", resp.StatusCode)
		}
	}

	t.Run("unbound subject", func(t *testing.T) {
		p.set(func(p *idp) { p.subject = "mallory-at-idp" })
		b := newBrowser(t, f.base)
		refusedWith(t, b, b.ssoAttempt("/holds"), "no Clawguard user is bound to it")
		if !strings.Contains(logs.String(), `"subject":"mallory-at-idp"`) || !strings.Contains(logs.String(), `"audit":true`) {
			t.Fatalf("the refusal is not in the audit log:\n%s", logs.String())
		}
	})
	p.set(func(p *idp) { p.subject = "dana-at-idp" })
	t.Run("wrong state", func(t *testing.T) {
		b := newBrowser(t, f.base)
		cb, _ := url.Parse(b.ssoAttempt("/holds"))
		q := cb.Query()
		q.Set("state", "not-this-browsers")
		refusedWith(t, b, cb.Path+"?"+q.Encode(), "does not belong to the sign-in this browser started")
	})
	t.Run("another browser's callback", func(t *testing.T) {
		// Login CSRF: the attacker's callback, opened in the victim's browser.
		cb := newBrowser(t, f.base).ssoAttempt("/holds")
		refusedWith(t, newBrowser(t, f.base), cb, "was not started here")
	})
	t.Run("wrong nonce", func(t *testing.T) {
		p.set(func(p *idp) { p.nonceTo = "replayed-nonce" })
		defer p.set(func(p *idp) { p.nonceTo = "" })
		b := newBrowser(t, f.base)
		refusedWith(t, b, b.ssoAttempt("/holds"), "not issued for this sign-in")
	})
	t.Run("another issuer", func(t *testing.T) {
		p.set(func(p *idp) { p.tamper = func(c *jwt.Claims) { c.Issuer = "https://idp.evil.example" } })
		defer p.set(func(p *idp) { p.tamper = nil })
		b := newBrowser(t, f.base)
		refusedWith(t, b, b.ssoAttempt("/holds"), "ID token was not accepted")
	})
	t.Run("another audience", func(t *testing.T) {
		p.set(func(p *idp) { p.tamper = func(c *jwt.Claims) { c.Audience = jwt.Audience{"another-app"} } })
		defer p.set(func(p *idp) { p.tamper = nil })
		b := newBrowser(t, f.base)
		refusedWith(t, b, b.ssoAttempt("/holds"), "ID token was not accepted")
	})
	t.Run("another key", func(t *testing.T) {
		p.set(func(p *idp) { p.signer = other })
		defer p.set(func(p *idp) { p.signer = nil })
		b := newBrowser(t, f.base)
		refusedWith(t, b, b.ssoAttempt("/holds"), "ID token was not accepted")
	})
	var n int
	if err := f.srv.Pool.QueryRow(ctx, `SELECT count(*) FROM console_sessions`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("console sessions after refused sign-ins: %d %v", n, err)
	}
	// And the same provider signs Dana in.
	newBrowser(t, f.base).ssoSignIn("/holds")
}
