package resources

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/authn"
	"github.com/clawguard/clawguard/server/internal/paging"
	"github.com/clawguard/clawguard/server/internal/store"
)

func scanToken(row pgx.Row) (*guardv1.Token, error) {
	var (
		t       guardv1.Token
		kind    string
		created time.Time
		revoked *time.Time
		expires *time.Time
		used    *time.Time
		labels  []byte
	)
	err := row.Scan(&t.Id, &kind, &t.Name, &t.RunnerId, &t.UserId, &created, &revoked, &t.Host, &labels, &t.Channels, &expires, &used)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(labels, &t.Labels); err != nil {
		return nil, fmt.Errorf("token %s labels: %w", t.Id, err)
	}
	if t.Kind, err = enumword.Parse[guardv1.Principal](kind); err != nil {
		return nil, fmt.Errorf("token %s: %w", t.Id, err)
	}
	t.CreatedAt, t.RevokedAt, t.ExpiresAt, t.LastUsedAt = ts(created), tsPtr(revoked), tsPtr(expires), tsPtr(used)
	return &t, nil
}

const tokenColumns = `id, kind, name, COALESCE(runner_id, ''), COALESCE(user_id, ''), created_at, revoked_at, host, labels, channels, expires_at, last_used_at`

// Shapes of what a token is bound to. A channel is the namespace of user
// ids ("telegram" of "telegram:dana").
var (
	channelName = regexp.MustCompile(`^[a-z0-9_-]{1,32}$`)
	labelKey    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,62}$`)
	labelValue  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/-]{0,62}$`)
)

const maxTokenLabels, maxTokenChannels = 32, 16

// maxTokenLife bounds a token's expires_in (as the proto's rule does).
const maxTokenLife = 10 * 365 * 24 * time.Hour

// checkTokenBindings validates what a runner or bridge token speaks for:
// placement (host, labels) only on runner tokens, channels only on bridge
// tokens. A bridge token without channels asserts nobody: it may file and
// await holds (a credential gateway), never click, decide or route.
func checkTokenBindings(kind string, req *guardv1.CreateTokenRequest) (host string, labels map[string]string, channels []string, err error) {
	host = strings.TrimSpace(req.GetHost())
	labels = req.GetLabels()
	if kind != "runner" && (host != "" || len(labels) > 0) {
		return "", nil, nil, invalid("host", "only runner tokens carry a host and labels")
	}
	if host != "" && !hostLabel.MatchString(host) {
		return "", nil, nil, invalid("host", "%q is not a host name", host)
	}
	if len(labels) > maxTokenLabels {
		return "", nil, nil, invalid("labels", "at most %d", maxTokenLabels)
	}
	for k, v := range labels {
		if !labelKey.MatchString(k) || !labelValue.MatchString(v) {
			return "", nil, nil, invalid("labels", "%q=%q: want key=value of letters, digits and ._/- (value also :)", k, v)
		}
	}
	if kind != "bridge" && len(req.GetChannels()) > 0 {
		return "", nil, nil, invalid("channels", "only bridge tokens speak for channels")
	}
	if len(req.GetChannels()) > maxTokenChannels {
		return "", nil, nil, invalid("channels", "at most %d", maxTokenChannels)
	}
	for _, c := range req.GetChannels() {
		if !channelName.MatchString(c) {
			return "", nil, nil, invalid("channels", "%q is not a channel namespace (lower-case letters, digits, _ and -)", c)
		}
		if !slices.Contains(channels, c) {
			channels = append(channels, c)
		}
	}
	if labels == nil {
		labels = map[string]string{}
	}
	if channels == nil {
		channels = []string{}
	}
	return host, labels, channels, nil
}

// CreateToken mints a token: the secret is returned once and only its hash
// is stored. Runner tokens are bound to one runner id and carry the host
// and labels it is placed by; user tokens act as an existing user; bridge
// tokens speak for their channel namespaces; operator tokens carry nothing.
func (s *Service) CreateToken(ctx context.Context, req *guardv1.CreateTokenRequest) (_ *guardv1.CreateTokenResponse, err error) {
	defer store.Faulted(&err, "token")
	nt, err := checkCreateToken(req)
	if err != nil {
		return nil, err
	}
	var expiresIn time.Duration
	if d := req.GetExpiresIn(); d != nil {
		if expiresIn = d.AsDuration(); expiresIn < time.Minute || expiresIn > maxTokenLife {
			return nil, invalid("expires_in", "%s: want at least a minute and at most %s", expiresIn, maxTokenLife)
		}
	}
	secret, err := authn.NewSecret()
	if err != nil {
		return nil, fmt.Errorf("mint secret: %w", err)
	}
	name := strings.TrimSpace(req.GetName())
	if name == "" {
		name = nt.kind + " token"
	}
	id, err := authn.StoreToken(ctx, s.pool, authn.NewToken{Kind: nt.kind, Name: name, Secret: secret,
		RunnerID: nt.runnerID, UserID: nt.userID, Host: nt.host, Labels: nt.labels, Channels: nt.channels, ExpiresIn: expiresIn})
	if store.IsForeignKeyViolation(err) {
		return nil, notFound("user %q not found", nt.userID)
	}
	if err != nil {
		return nil, err
	}
	t, err := scanToken(s.pool.QueryRow(ctx, `SELECT `+tokenColumns+` FROM tokens WHERE id = $1`, id))
	if err != nil {
		return nil, err
	}
	return &guardv1.CreateTokenResponse{Token: t, Secret: secret}, nil
}

// ListTokens lists a page of tokens, oldest first; secrets are never stored or shown.
func (s *Service) ListTokens(ctx context.Context, req *guardv1.ListTokensRequest) (_ *guardv1.ListTokensResponse, err error) {
	defer store.Faulted(&err, "tokens")
	v, err := s.viewer(ctx)
	if err != nil {
		return nil, err
	}
	if err := v.requireAll("tokens"); err != nil {
		return nil, err
	}
	limit, err := paging.Limit(req.GetLimit())
	if err != nil {
		return nil, err
	}
	// Keyset paging (created_at, id).
	filter := paging.Filter("tokens")
	cur, err := paging.Decode(req.GetPageToken(), filter)
	if err != nil {
		return nil, err
	}
	var after *time.Time
	afterID := ""
	if cur != nil {
		after, afterID = &cur.At, cur.ID
	}
	rows, err := s.pool.Query(ctx, `SELECT `+tokenColumns+` FROM tokens
		WHERE ($1::timestamptz IS NULL OR (created_at, id) > ($1, $2))
		ORDER BY created_at, id LIMIT $3`, after, afterID, limit+1)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := &guardv1.ListTokensResponse{}
	for rows.Next() {
		if len(out.Tokens) == limit {
			// One row past the page: there is a next one.
			last := out.Tokens[limit-1]
			out.NextPageToken = paging.Next(last.GetCreatedAt().AsTime(), last.GetId(), filter)
			break
		}
		t, err := scanToken(rows)
		if err != nil {
			return nil, err
		}
		out.Tokens = append(out.Tokens, t)
	}
	return out, rows.Err()
}

// RevokeToken revokes a token (idempotent: the first revocation time is
// kept). Every replica refuses it once its authn cache entry expires (an
// expiry, known in advance, is refused to the instant).
func (s *Service) RevokeToken(ctx context.Context, req *guardv1.RevokeTokenRequest) (_ *guardv1.RevokeTokenResponse, err error) {
	defer store.Faulted(&err, "token")
	if err := required("id", req.GetId()); err != nil {
		return nil, err
	}
	found, err := authn.RevokeToken(ctx, s.pool, req.GetId())
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, notFound("token %q not found", req.GetId())
	}
	return &guardv1.RevokeTokenResponse{}, nil
}
