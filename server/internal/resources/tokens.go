package resources

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/authn"
	"github.com/clawguard/clawguard/server/internal/store"
)

func scanToken(row pgx.Row) (*guardv1.Token, error) {
	var (
		t       guardv1.Token
		kind    string
		created time.Time
		revoked *time.Time
	)
	if err := row.Scan(&t.Id, &kind, &t.Name, &t.RunnerId, &t.UserId, &created, &revoked); err != nil {
		return nil, err
	}
	t.Kind = authn.KindFromString(kind)
	t.CreatedAt, t.RevokedAt = ts(created), tsPtr(revoked)
	return &t, nil
}

const tokenColumns = `id, kind, name, COALESCE(runner_id, ''), COALESCE(user_id, ''), created_at, revoked_at`

// CreateToken mints a token: the secret is returned once and only its hash
// is stored. Runner tokens are bound to one runner id; user tokens act as
// an existing user; operator and bridge tokens carry neither.
func (s *Service) CreateToken(ctx context.Context, req *guardv1.CreateTokenRequest) (*guardv1.CreateTokenResponse, error) {
	kind := authn.KindString(req.GetKind())
	if kind == "" {
		return nil, invalid("kind", "required: operator, runner, bridge or user")
	}
	runnerID, userID := strings.TrimSpace(req.GetRunnerId()), strings.TrimSpace(req.GetUserId())
	if kind == "runner" {
		if err := required("runner_id", runnerID); err != nil {
			return nil, invalid("runner_id", "required for a runner token")
		}
	} else if runnerID != "" {
		return nil, invalid("runner_id", "only runner tokens are bound to a runner")
	}
	if kind == "user" {
		if err := required("user_id", userID); err != nil {
			return nil, invalid("user_id", "required for a user token")
		}
	} else if userID != "" {
		return nil, invalid("user_id", "only user tokens act as a user")
	}
	secret, err := authn.NewSecret()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "mint secret: %v", err)
	}
	name := strings.TrimSpace(req.GetName())
	if name == "" {
		name = kind + " token"
	}
	t, err := scanToken(s.pool.QueryRow(ctx, `INSERT INTO tokens (id, kind, name, hash, runner_id, user_id)
		VALUES ($1, $2, $3, $4, NULLIF($5, ''), NULLIF($6, '')) RETURNING `+tokenColumns,
		newID("tok_"), kind, name, authn.Hash(secret), runnerID, userID))
	if store.IsForeignKeyViolation(err) {
		return nil, notFound("user %q not found", userID)
	}
	if err != nil {
		return nil, err
	}
	return &guardv1.CreateTokenResponse{Token: t, Secret: secret}, nil
}

// ListTokens lists tokens, oldest first; secrets are never stored or shown.
func (s *Service) ListTokens(ctx context.Context, _ *guardv1.ListTokensRequest) (*guardv1.ListTokensResponse, error) {
	v, err := s.viewer(ctx)
	if err != nil {
		return nil, err
	}
	if err := v.requireAll("tokens"); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+tokenColumns+` FROM tokens ORDER BY created_at, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := &guardv1.ListTokensResponse{}
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, err
		}
		out.Tokens = append(out.Tokens, t)
	}
	return out, rows.Err()
}

// RevokeToken revokes a token (idempotent: the first revocation time is
// kept). Every replica refuses it once its authn cache entry expires.
func (s *Service) RevokeToken(ctx context.Context, req *guardv1.RevokeTokenRequest) (*guardv1.RevokeTokenResponse, error) {
	if err := required("id", req.GetId()); err != nil {
		return nil, err
	}
	tag, err := s.pool.Exec(ctx, `UPDATE tokens SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1`, req.GetId())
	if err := affected(tag, err, "token %q not found", req.GetId()); err != nil {
		return nil, err
	}
	return &guardv1.RevokeTokenResponse{}, nil
}
