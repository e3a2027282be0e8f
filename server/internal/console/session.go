package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/clawguard/clawguard/proto/retry"
	"github.com/clawguard/clawguard/server/internal/fault"

	"github.com/cenkalti/backoff/v5"
	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/api"
	"github.com/clawguard/clawguard/server/internal/authn"
	"github.com/clawguard/clawguard/server/internal/store"
)

// Cookie names. The session cookie carries a random id whose SHA-256 is the
// console_sessions key; the pre-session cookie protects the sign-in form
// itself (login CSRF) before a session exists.
const (
	SessionCookie    = "cg_session"
	PreSessionCookie = "cg_presession"
	CSRFField        = "csrf"
)

// session is a signed-in user.
type session struct {
	UserID   string
	TokenID  string // the user token it was made from, or oidcPrincipal's name of its binding
	CSRF     string
	SignedIn time.Time // the session's creation: a step-up wants it recent
	idHash   []byte
}

func (s *session) caller() authn.Caller {
	return authn.Caller{Principal: authn.Principal{Kind: guardv1.Principal_PRINCIPAL_USER, TokenID: s.TokenID, UserID: s.UserID}, Via: "console", SignedIn: s.SignedIn}
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func hashID(id string) []byte {
	h := sha256.Sum256([]byte(id))
	return h[:]
}

func (c *Console) cookie(name, value string, maxAge time.Duration) *http.Cookie {
	ck := &http.Cookie{Name: name, Value: value, Path: "/", HttpOnly: true, Secure: c.d.Secure,
		SameSite: http.SameSiteStrictMode, MaxAge: int(maxAge.Seconds())}
	if maxAge < 0 {
		ck.MaxAge = -1
	}
	return ck
}

// load reads the request's session: present, unexpired, and its token
// neither revoked nor expired, or its OIDC binding still there (either
// ends its console sessions at once; so does deleting the user, whose
// tokens and bindings go with it). A role lost ends no
// session: every page and click is checked as the user, so it is refused.
func (c *Console) load(ctx context.Context, r *http.Request) (*session, error) {
	ck, err := r.Cookie(SessionCookie)
	if err != nil || ck.Value == "" {
		return nil, nil
	}
	s := &session{idHash: hashID(ck.Value)}
	var issuer, subject string
	err = c.d.Pool.QueryRow(ctx, `SELECT s.user_id, COALESCE(s.token_id, ''), s.csrf, s.created_at,
			COALESCE(s.oidc_issuer, ''), COALESCE(s.oidc_subject, '')
		FROM console_sessions s
		LEFT JOIN tokens t ON t.id = s.token_id
		LEFT JOIN oidc_bindings b ON b.issuer = s.oidc_issuer AND b.subject = s.oidc_subject
		WHERE s.id_hash = $1 AND s.expires_at > now()
		  AND ((t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now()) AND t.kind = 'user' AND t.user_id = s.user_id)
		    OR b.user_id = s.user_id)`,
		s.idHash).Scan(&s.UserID, &s.TokenID, &s.CSRF, &s.SignedIn, &issuer, &subject)
	if err == nil && s.TokenID == "" {
		s.TokenID = oidcPrincipal(issuer, subject)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read console session: %w", err)
	}
	return s, nil
}

// loadRetrying is load for a form post (a click): a database that cannot
// serve now is asked again, with back-off, for up to clickRetryFor, so the
// click is not lost to an outage shorter than that.
func (c *Console) loadRetrying(ctx context.Context, r *http.Request) (*session, error) {
	return backoff.Retry(ctx, func() (*session, error) {
		s, err := c.load(ctx, r)
		if err != nil && !store.IsUnavailable(err) {
			return nil, backoff.Permanent(err)
		}
		return s, err
	}, backoff.WithBackOff(retry.Exponential(200*time.Millisecond, fault.DefaultRetryAfter)), backoff.WithMaxElapsedTime(clickRetryFor))
}

// get wraps a page that needs a session: without one, the browser goes to
// sign-in (an event stream gets 401).
func (c *Console) get(h func(w http.ResponseWriter, r *http.Request, s *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := c.load(r.Context(), r)
		if err != nil {
			c.failRPC(w, r, nil, store.Fault("console session", err))
			return
		}
		if s == nil {
			if r.URL.Path == "/events" || r.URL.Query().Has("fragment") {
				http.Error(w, "signed out", http.StatusUnauthorized)
				return
			}
			http.Redirect(w, r, "/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		h(w, c.withNames(r, s), s)
	}
}

// post wraps a form handler: a session, a same-origin request, and the
// session's CSRF token in the form — or 403 and nothing done.
func (c *Console) post(h func(w http.ResponseWriter, r *http.Request, s *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 512<<10)
		s, err := c.loadRetrying(r.Context(), r)
		if err != nil {
			c.failRPC(w, r, nil, store.Fault("console session", err))
			return
		}
		var why string
		switch {
		case s == nil:
			why = "not signed in (or the session expired): sign in again"
		case !sameOrigin(r):
			why = "cross-origin form refused"
		case !tokenEqual(r.PostFormValue(CSRFField), s.CSRF):
			why = "missing or wrong CSRF token: reload the page and try again"
		}
		if why != "" {
			c.refused(r, s, why)
			c.fail(w, r, s, http.StatusForbidden, why)
			return
		}
		h(w, c.withNames(r, s), s)
	}
}

func tokenEqual(got, want string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// sameOrigin refuses a request whose Origin (or, without one, Referer)
// names another host. Browsers send Origin on every POST; a request with
// neither (curl) still needs the CSRF token.
func sameOrigin(r *http.Request) bool {
	src := r.Header.Get("Origin")
	if src == "" {
		src = r.Header.Get("Referer")
	}
	if src == "" {
		return true
	}
	u, err := url.Parse(src)
	return err == nil && u.Host == r.Host
}

func (c *Console) signinPage(w http.ResponseWriter, r *http.Request) {
	pre := randomToken()
	http.SetCookie(w, c.cookie(PreSessionCookie, pre, 10*time.Minute))
	c.render(w, r, http.StatusOK, "signin", nil, "Sign in", c.signinData(pre, c.afterSignIn(r.URL.Query().Get("next")), ""))
}

// signinData is the sign-in page's: SSO is offered when configured.
func (c *Console) signinData(pre, next, msg string) map[string]string {
	d := map[string]string{"Pre": pre, "Next": next, "Error": msg}
	if c.oidc != nil {
		d["SSO"] = oidcPath + "?next=" + url.QueryEscape(next)
	}
	return d
}

// signin exchanges a user token for a session cookie.
func (c *Console) signin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	pre, err := r.Cookie(PreSessionCookie)
	if err != nil || !sameOrigin(r) || !tokenEqual(r.PostFormValue(CSRFField), pre.Value) {
		c.refused(r, nil, "sign-in form without its pre-session token or from another origin")
		c.fail(w, r, nil, http.StatusForbidden, "the sign-in form expired or came from elsewhere: reload it and try again")
		return
	}
	next := c.afterSignIn(r.PostFormValue("next"))
	token := strings.TrimSpace(r.PostFormValue("token"))
	again := func(msg string) {
		pre := randomToken()
		http.SetCookie(w, c.cookie(PreSessionCookie, pre, 10*time.Minute))
		c.render(w, r, http.StatusUnauthorized, "signin", nil, "Sign in", c.signinData(pre, next, msg))
	}
	if token == "" {
		again("paste your user token (ncl tokens create --kind user)")
		return
	}
	ctx := metadata.NewIncomingContext(r.Context(), metadata.Pairs("authorization", "Bearer "+token))
	actx, err := c.d.Auth.Authenticate(ctx)
	if err != nil {
		if mapped := api.Status(store.Fault("sign-in", err)); status.Code(mapped) == codes.Unavailable {
			// The token could not be checked (its database): not a refusal.
			c.failRPC(w, r, nil, mapped)
			return
		}
		c.refused(r, nil, "sign-in with a token that was not accepted: "+fault.Message(err))
		again("that token was not accepted")
		return
	}
	caller, _ := authn.FromContext(actx)
	if caller.Principal.Kind != guardv1.Principal_PRINCIPAL_USER {
		again("the console signs in people, and this is " + enumword.WithArticle(enumword.String(caller.Principal.Kind)) +
			" token: sign in with a user token (an operator makes one: ncl tokens create --kind user --name <name> --user <channel>:<handle> --secret-file <file>)")
		return
	}
	id := randomToken()
	_, err = c.d.Pool.Exec(r.Context(), `WITH gone AS (DELETE FROM console_sessions WHERE expires_at < now())
		INSERT INTO console_sessions (id_hash, token_id, user_id, csrf, expires_at) VALUES ($1, $2, $3, $4, $5)`,
		hashID(id), caller.Principal.TokenID, caller.Principal.UserID, randomToken(), c.now().Add(c.d.SessionTTL))
	if err != nil {
		c.failRPC(w, r, nil, store.Fault("console session", err))
		return
	}
	c.d.Log.Info("console sign-in", "user", caller.Principal.UserID, "token", caller.Principal.TokenID)
	http.SetCookie(w, c.cookie(SessionCookie, id, c.d.SessionTTL))
	http.SetCookie(w, c.cookie(PreSessionCookie, "", -1))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) signout(w http.ResponseWriter, r *http.Request, s *session) {
	if _, err := c.d.Pool.Exec(r.Context(), `DELETE FROM console_sessions WHERE id_hash = $1`, s.idHash); err != nil {
		c.failRPC(w, r, s, store.Fault("console session", err))
		return
	}
	http.SetCookie(w, c.cookie(SessionCookie, "", -1))
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}
