package resources

import (
	"context"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/fault"
	"github.com/clawguard/clawguard/server/internal/store"
)

// OIDC bindings (migration 0311): the operator's word that an identity
// provider's subject is a Clawguard user. The console signs nobody in by an
// email or a name; only a binding maps an ID token to a user.

const bindingCols = `user_id, issuer, subject, created_at`

func scanBinding(row pgx.Row) (*guardv1.OidcBinding, error) {
	var (
		b       guardv1.OidcBinding
		created time.Time
	)
	err := row.Scan(&b.UserId, &b.Issuer, &b.Subject, &created)
	b.CreatedAt = ts(created)
	return &b, err
}

// checkOidcBinding: a user, an https issuer URL (http only for a loopback
// test provider, as go-oidc compares it byte for byte) and a subject.
func checkOidcBinding(user, issuer, subject string) error {
	if err := validUserID("user_id", user); err != nil {
		return err
	}
	if err := required("issuer", issuer); err != nil {
		return err
	}
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" ||
		(u.Scheme != "https" && (u.Scheme != "http" || !loopbackHost(u.Hostname()))) {
		return invalid("issuer", "%q is not an issuer URL (https://…, as the provider's ID tokens carry it)", issuer)
	}
	if strings.TrimSpace(subject) != subject {
		return invalid("subject", "has surrounding spaces")
	}
	return required("subject", subject)
}

func loopbackHost(h string) bool {
	return h == "localhost" || h == "127.0.0.1" || h == "::1"
}

// oidcBindingsOf lists a user's bindings (GetUser shows them).
func (s *Service) oidcBindingsOf(ctx context.Context, user string) ([]*guardv1.OidcBinding, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+bindingCols+` FROM oidc_bindings WHERE user_id = $1 ORDER BY issuer, subject`, user)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*guardv1.OidcBinding
	for rows.Next() {
		b, err := scanBinding(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// BindOidc binds (issuer, subject) to a user. Binding it again to the same
// user is a no-op (a replay); to another user it is refused: moving an
// identity is an unbind then a bind, two deliberate steps.
func (s *Service) BindOidc(ctx context.Context, req *guardv1.BindOidcRequest) (_ *guardv1.BindOidcResponse, err error) {
	defer store.Faulted(&err, "OIDC binding")
	if err := checkOidcBinding(req.GetUserId(), req.GetIssuer(), req.GetSubject()); err != nil {
		return nil, err
	}
	var b *guardv1.OidcBinding
	err = store.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var ok bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM users WHERE id = $1)`, req.GetUserId()).Scan(&ok); err != nil {
			return err
		}
		if !ok {
			return notFound("user %q not found", req.GetUserId())
		}
		b, err = scanBinding(tx.QueryRow(ctx, `INSERT INTO oidc_bindings (user_id, issuer, subject) VALUES ($1, $2, $3)
			ON CONFLICT (issuer, subject) DO UPDATE SET user_id = oidc_bindings.user_id
			RETURNING `+bindingCols, req.GetUserId(), req.GetIssuer(), req.GetSubject()))
		return err
	})
	if err != nil {
		return nil, err
	}
	if b.GetUserId() != req.GetUserId() {
		return nil, fault.Existsf("subject %q of %s is bound to user %q: unbind it first", req.GetSubject(), req.GetIssuer(), b.GetUserId())
	}
	return &guardv1.BindOidcResponse{Binding: b}, nil
}

// UnbindOidc removes a user's binding; the console sessions it made end
// (ON DELETE CASCADE).
func (s *Service) UnbindOidc(ctx context.Context, req *guardv1.UnbindOidcRequest) (_ *guardv1.UnbindOidcResponse, err error) {
	defer store.Faulted(&err, "OIDC binding")
	if err := checkOidcBinding(req.GetUserId(), req.GetIssuer(), req.GetSubject()); err != nil {
		return nil, err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM oidc_bindings WHERE user_id = $1 AND issuer = $2 AND subject = $3`,
		req.GetUserId(), req.GetIssuer(), req.GetSubject())
	if err := affected(tag, err, "user %q has no binding to subject %q of %s", req.GetUserId(), req.GetSubject(), req.GetIssuer()); err != nil {
		return nil, err
	}
	return &guardv1.UnbindOidcResponse{}, nil
}
