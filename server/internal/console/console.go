// Package console is the approvals console: a server-rendered web UI on its
// own listener where approvers see pending holds live, read why the guard
// decided what it did, ask what-if questions and resolve holds.
//
// It adds no authority: a user signs in with their user token (exchanged
// for a session cookie), and every read and click runs as that user through
// Backend — the same principal check, guard interceptor and gRPC handler an
// `ncl` call runs. Pages work without JavaScript; with it, the pending list
// and hold pages update from server-sent events fed by Approvals.Watch.
//
// Sign-in is a user token or OIDC (oidc.go: code flow with PKCE, state and
// nonce; the ID token's (issuer, subject) maps to a user only through
// oidc_bindings, which resources owns), then a session cookie
// (console_sessions, only the hash stored; the redirect after it is a
// console page, parsed strictly and re-emitted: next.go); CSRF on every
// form; server-sent events from Approvals.Watch. Every read and click goes
// through app's in-process backend, as the signed-in user: the RPC's
// principal check, the admin guard and the handler. The pages have no SQL of
// their own (a hold's history and who may resolve it come from
// Approvals.Get). Names on a page come from one per-request book (names.go:
// ListGroups and ListUsers as that user, read once, on first use), so read
// scoping decides which names a page shows. A hold's page lays out its card
// (proto/holdcard), as the bridges and ncl do. One file per page:
// holdpage.go, click.go, decisions.go, whatif.go, tables.go, freezes.go,
// grants.go, resolved.go, usage.go.
package console

import (
	"context"
	"crypto/tls"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/authn"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Backend runs the console's requests as the signed-in user.
type Backend interface {
	// Call runs one unary RPC (full method name) as caller, through the
	// same checks as a gRPC call.
	Call(ctx context.Context, caller authn.Caller, fullMethod string, req proto.Message) (proto.Message, error)
	// Watch runs Approvals.Watch as caller until ctx ends or send fails;
	// started runs once the subscription is live (before any send).
	Watch(ctx context.Context, caller authn.Caller, req *guardv1.WatchRequest, started func() error, send func(*guardv1.WatchResponse) error) error
}

// Deps is what the console needs.
type Deps struct {
	Pool       *pgxpool.Pool // console_sessions (the console's own), the OIDC sign-in
	Auth       *authn.Authenticator
	Log        *slog.Logger
	Backend    Backend
	SessionTTL time.Duration
	// StandingGrantMax is the server's --standing-grant-max: the hold page
	// offers standing approvals only when it is above zero.
	StandingGrantMax time.Duration
	// Secure marks cookies Secure (the listener serves TLS).
	Secure bool
	// OIDC enables "Sign in with SSO" (nil = token sign-in only).
	OIDC *OIDCConfig
}

// Console is the HTTP handler.
type Console struct {
	d     Deps
	pages map[string]*template.Template
	mux   *http.ServeMux
	now   func() time.Time
	oidc  *oidcClient // nil: no SSO
}

// New builds the console (templates are parsed once; a broken template is a
// programming error and panics at start-up).
func New(d Deps) *Console {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.SessionTTL <= 0 {
		d.SessionTTL = 8 * time.Hour
	}
	c := &Console{d: d, pages: map[string]*template.Template{}, now: time.Now}
	if d.OIDC != nil {
		c.oidc = &oidcClient{cfg: *d.OIDC}
	}
	for _, p := range []string{"signin", "holds", "hold", "decisions", "decision", "whatif", "table", "error", "freezes", "grants", "signedin", "resolved"} {
		c.pages[p] = template.Must(template.New(p).Funcs(funcs).ParseFS(templateFS,
			"templates/layout.html", "templates/partials.html", "templates/"+p+".html"))
	}
	c.routes()
	return c
}

// Handler is the console's HTTP handler (tests serve it with httptest).
func (c *Console) Handler() http.Handler { return securityHeaders(c.mux) }

// Serve serves on lis (TLS when tlsCfg is set) until ctx ends.
func (c *Console) Serve(ctx context.Context, lis net.Listener, tlsCfg *tls.Config) error {
	srv := &http.Server{Handler: c.Handler(), ReadHeaderTimeout: 5 * time.Second,
		ErrorLog: slog.NewLogLogger(c.d.Log.Handler(), slog.LevelWarn)}
	if tlsCfg != nil {
		lis = tls.NewListener(lis, tlsCfg)
	}
	go func() {
		<-ctx.Done()
		// Event streams never end on their own: close, do not wait.
		_ = srv.Close()
	}()
	if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("console server: %w", err)
	}
	return nil
}

func (c *Console) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	m.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	m.HandleFunc("GET /signin", c.signinPage)
	m.HandleFunc("POST /signin", c.signin)
	m.HandleFunc("POST /signout", c.post(c.signout))
	if c.oidc != nil {
		m.HandleFunc("GET "+oidcPath, c.oidcStart)
		m.HandleFunc("GET "+oidcPath+"/callback", c.oidcCallback)
	}
	m.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/holds", http.StatusSeeOther) })
	m.HandleFunc("GET /holds", c.get(c.holdsPage))
	m.HandleFunc("GET /holds/resolved", c.get(c.resolvedPage))
	m.HandleFunc("GET /holds/{id}", c.get(c.holdPage))
	m.HandleFunc("POST /holds/{id}/resolve", c.post(c.resolve))
	m.HandleFunc("GET /decisions", c.get(c.decisionsPage))
	m.HandleFunc("GET /decisions/{id}", c.get(c.decisionPage))
	m.HandleFunc("GET /whatif", c.get(c.whatifPage))
	m.HandleFunc("POST /whatif", c.post(c.whatif))
	m.HandleFunc("GET /groups", c.get(c.groupsPage))
	m.HandleFunc("GET /destinations", c.get(c.destinationsPage))
	m.HandleFunc("GET /policies", c.get(c.policiesPage))
	m.HandleFunc("GET /roles", c.get(c.rolesPage))
	m.HandleFunc("GET /runners", c.get(c.runnersPage))
	m.HandleFunc("GET /freezes", c.get(c.freezesPage))
	m.HandleFunc("POST /freezes", c.post(c.freeze))
	m.HandleFunc("POST /freezes/unfreeze", c.post(c.unfreeze))
	m.HandleFunc("GET /grants", c.get(c.grantsPage))
	m.HandleFunc("GET /usage", c.get(c.usagePage))
	m.HandleFunc("POST /grants/revoke", c.post(c.revokeGrant))
	m.HandleFunc("GET /events", c.get(c.events))
	c.mux = m
}

// securityHeaders: no framing, no inline script, nothing cached, nothing
// loaded from elsewhere.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
			"connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		// same-origin, not no-referrer: with no-referrer a browser sends "Origin: null"
		// on form posts, and sameOrigin refuses those.
		hd.Set("Referrer-Policy", "same-origin")
		if r.URL.Path[:min(len(r.URL.Path), 8)] != "/static/" {
			hd.Set("Cache-Control", "no-store")
		}
		h.ServeHTTP(w, r)
	})
}
