package resources

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/paging"
	"github.com/clawguard/clawguard/server/internal/store"
)

// userID is "<channel>:<handle>" (the users.id CHECK, plus no whitespace
// and a sane length).
var userID = regexp.MustCompile(`^[a-z0-9_-]+:\S+$`)

const maxUserID = 200

func validUserID(field, id string) error {
	if err := required(field, id); err != nil {
		return err
	}
	if len(id) > maxUserID || !userID.MatchString(id) {
		return invalid(field, "%q is not a namespaced user id \"<channel>:<handle>\"", id)
	}
	return nil
}

func scanUser(row pgx.Row) (*guardv1.User, error) {
	var (
		u       guardv1.User
		created time.Time
	)
	err := row.Scan(&u.Id, &u.DisplayName, &created)
	u.CreatedAt = ts(created)
	return &u, err
}

// ListUsers lists users (operator, owners, global admins; others see only
// themselves).
func (s *Service) ListUsers(ctx context.Context, req *guardv1.ListUsersRequest) (_ *guardv1.ListUsersResponse, err error) {
	defer store.Faulted(&err, "users")
	v, err := s.viewer(ctx)
	if err != nil {
		return nil, err
	}
	if v.userID == "" {
		if err := v.requireAll("users"); err != nil {
			return nil, err
		}
	}
	limit, err := paging.Limit(req.GetLimit())
	if err != nil {
		return nil, err
	}
	// Keyset paging on id, bound to the viewer.
	filter := paging.Filter("users", v.all, v.userID)
	cur, err := paging.DecodeKey(req.GetPageToken(), filter)
	if err != nil {
		return nil, err
	}
	afterID := ""
	if cur != nil {
		afterID = cur.ID
	}
	rows, err := s.pool.Query(ctx, `SELECT id, display_name, created_at FROM users WHERE ($1 OR id = $2) AND id > $3 ORDER BY id LIMIT $4`,
		v.all, v.userID, afterID, limit+1)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := &guardv1.ListUsersResponse{}
	for rows.Next() {
		if len(out.Users) == limit {
			// One row past the page: there is a next one.
			out.NextPageToken = paging.NextKey("", out.Users[limit-1].GetId(), filter)
			break
		}
		u, err := scanUser(rows)
		if err != nil {
			return nil, err
		}
		out.Users = append(out.Users, u)
	}
	return out, rows.Err()
}

// GetUser reads a user.
func (s *Service) GetUser(ctx context.Context, req *guardv1.GetUserRequest) (_ *guardv1.GetUserResponse, err error) {
	defer store.Faulted(&err, "user")
	if err := required("id", req.GetId()); err != nil {
		return nil, err
	}
	v, err := s.viewer(ctx)
	if err != nil {
		return nil, err
	}
	if req.GetId() != v.userID {
		if err := v.requireAll("users"); err != nil {
			return nil, err
		}
	}
	u, err := scanUser(s.pool.QueryRow(ctx, `SELECT id, display_name, created_at FROM users WHERE id = $1`, req.GetId()))
	if store.IsNoRows(err) {
		return nil, notFound("user %q not found", req.GetId())
	}
	if err != nil {
		return nil, err
	}
	if u.OidcBindings, err = s.oidcBindingsOf(ctx, u.GetId()); err != nil {
		return nil, err
	}
	return &guardv1.GetUserResponse{User: u}, nil
}

// CreateUser creates a user with a namespaced id.
func (s *Service) CreateUser(ctx context.Context, req *guardv1.CreateUserRequest) (_ *guardv1.CreateUserResponse, err error) {
	defer store.Faulted(&err, "user")
	if err := validUserID("id", req.GetId()); err != nil {
		return nil, err
	}
	u, err := scanUser(s.pool.QueryRow(ctx, `INSERT INTO users (id, display_name) VALUES ($1, $2) RETURNING id, display_name, created_at`,
		req.GetId(), strings.TrimSpace(req.GetDisplayName())))
	if err != nil {
		return nil, err
	}
	return &guardv1.CreateUserResponse{User: u}, nil
}

// UpdateUser changes a user's display name.
func (s *Service) UpdateUser(ctx context.Context, req *guardv1.UpdateUserRequest) (_ *guardv1.UpdateUserResponse, err error) {
	defer store.Faulted(&err, "user")
	if err := required("id", req.GetId()); err != nil {
		return nil, err
	}
	u, err := scanUser(s.pool.QueryRow(ctx, `UPDATE users SET display_name = $2 WHERE id = $1 RETURNING id, display_name, created_at`,
		req.GetId(), strings.TrimSpace(req.GetDisplayName())))
	if store.IsNoRows(err) {
		return nil, notFound("user %q not found", req.GetId())
	}
	if err != nil {
		return nil, err
	}
	return &guardv1.UpdateUserResponse{User: u}, nil
}

// EnsureUser makes sure a user exists, giving it displayName when it has
// none yet (a chat's sender seen for the first time, a test's user).
func EnsureUser(ctx context.Context, q store.Querier, id, displayName string) error {
	_, err := q.Exec(ctx, `INSERT INTO users (id, display_name) VALUES ($1, $2)
		ON CONFLICT (id) DO UPDATE SET display_name = EXCLUDED.display_name
		WHERE users.display_name = '' AND EXCLUDED.display_name <> ''`, id, displayName)
	if err != nil {
		return fmt.Errorf("ensure user %s: %w", id, err)
	}
	return nil
}
