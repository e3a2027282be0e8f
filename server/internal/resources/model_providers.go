package resources

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/modelrule"
	"github.com/clawguard/clawguard/server/internal/fault"
	"github.com/clawguard/clawguard/server/internal/store"
)

// Model providers (migration 0430): the operator's; each credential is
// write-only. No read here returns it: it leaves the database only through
// the runner's GetModelRoute (package metering). A new credential is read by
// the runners within seconds (their route cache), so rotating one restarts
// nothing.

// defaultBaseURL is a kind's public API (the base URL its SDKs use).
var defaultBaseURL = map[string]string{
	modelrule.KindAnthropic: "https://api.anthropic.com",
	modelrule.KindOpenAI:    "https://api.openai.com/v1",
}

const providerColumns = `name, kind, base_url, credential <> '', credential_set_at`

func scanProvider(row pgx.Row) (*guardv1.ModelProvider, error) {
	var (
		p    guardv1.ModelProvider
		kind string
		set  *time.Time
	)
	if err := row.Scan(&p.Name, &kind, &p.BaseUrl, &p.HasCredential, &set); err != nil {
		return nil, err
	}
	k, err := enumFromColumn[guardv1.ModelProviderKind]("model_providers.kind", kind)
	if err != nil {
		return nil, err
	}
	p.Kind = k
	if set != nil {
		p.CredentialSetAt = timestamppb.New(*set)
	}
	return &p, nil
}

// SetModelProvider creates or changes a provider. A new one needs its kind
// (its base URL defaults to the kind's public API); a change keeps what it
// does not name, and its kind cannot change. The credential, when given,
// replaces the stored one ("" removes it: a provider that needs none).
func (s *Service) SetModelProvider(ctx context.Context, req *guardv1.SetModelProviderRequest) (_ *guardv1.SetModelProviderResponse, err error) {
	defer store.Faulted(&err, "model provider")
	kind, baseURL, cred, err := checkSetModelProvider(req)
	if err != nil {
		return nil, err
	}
	var out *guardv1.ModelProvider
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		var oldKind string
		err := tx.QueryRow(ctx, `SELECT kind FROM model_providers WHERE name = $1 FOR UPDATE`, req.GetName()).Scan(&oldKind)
		switch {
		case store.IsNoRows(err):
			if kind == "" {
				return invalid("kind", "required for a new provider: anthropic or openai")
			}
			if baseURL == "" {
				baseURL = defaultBaseURL[kind]
			}
			if _, err := tx.Exec(ctx, `INSERT INTO model_providers (name, kind, base_url, credential, credential_set_at)
				VALUES ($1, $2, $3, COALESCE($4, ''), CASE WHEN $4::text IS NULL THEN NULL ELSE now() END)`,
				req.GetName(), kind, baseURL, cred); err != nil {
				return fmt.Errorf("create model provider %s: %w", req.GetName(), err)
			}
		case err != nil:
			return err
		case kind != "" && kind != oldKind:
			return fault.Preconditionf("provider %s is of kind %s; a provider's kind does not change (delete it and set it again)", req.GetName(), oldKind)
		default:
			if _, err := tx.Exec(ctx, `UPDATE model_providers SET base_url = COALESCE(NULLIF($2, ''), base_url),
				credential = COALESCE($3, credential),
				credential_set_at = CASE WHEN $3::text IS NULL THEN credential_set_at ELSE now() END,
				updated_at = now() WHERE name = $1`, req.GetName(), baseURL, cred); err != nil {
				return fmt.Errorf("change model provider %s: %w", req.GetName(), err)
			}
		}
		out, err = scanProvider(tx.QueryRow(ctx, `SELECT `+providerColumns+` FROM model_providers WHERE name = $1`, req.GetName()))
		return err
	})
	if err != nil {
		return nil, err
	}
	return &guardv1.SetModelProviderResponse{Provider: out}, nil
}

// DeleteModelProvider removes a provider no group is given.
func (s *Service) DeleteModelProvider(ctx context.Context, req *guardv1.DeleteModelProviderRequest) (_ *guardv1.DeleteModelProviderResponse, err error) {
	defer store.Faulted(&err, "model provider")
	if err := modelrule.CheckProvider(req.GetName()); err != nil {
		return nil, invalid("name", "%v", err)
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		// Locked first: a group being given it either commits before the
		// check below reads, or finds it gone.
		var name string
		err := tx.QueryRow(ctx, `SELECT name FROM model_providers WHERE name = $1 FOR UPDATE`, req.GetName()).Scan(&name)
		if store.IsNoRows(err) {
			return notFound("provider %q not found", req.GetName())
		}
		if err != nil {
			return err
		}
		var groups []string
		if err := tx.QueryRow(ctx, `SELECT COALESCE(array_agg(agent_group_id ORDER BY agent_group_id), '{}') FROM container_configs
			WHERE $1 = ANY(model_providers)`, req.GetName()).Scan(&groups); err != nil {
			return err
		}
		if len(groups) > 0 {
			return fault.Preconditionf("provider %s is given to group(s) %s: take it from them first (ncl models use)", req.GetName(), strings.Join(groups, ", "))
		}
		_, err = tx.Exec(ctx, `DELETE FROM model_providers WHERE name = $1`, req.GetName())
		return err
	})
	if err != nil {
		return nil, err
	}
	return &guardv1.DeleteModelProviderResponse{}, nil
}

// ListModelProviders lists the providers by name: never a credential, only
// whether one is set and when.
func (s *Service) ListModelProviders(ctx context.Context, _ *guardv1.ListModelProvidersRequest) (_ *guardv1.ListModelProvidersResponse, err error) {
	defer store.Faulted(&err, "model providers")
	rows, err := s.pool.Query(ctx, `SELECT `+providerColumns+` FROM model_providers ORDER BY name`)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*guardv1.ModelProvider, error) { return scanProvider(r) })
	if err != nil {
		return nil, err
	}
	return &guardv1.ListModelProvidersResponse{Providers: list}, nil
}

func checkSetModelProvider(r *guardv1.SetModelProviderRequest) (kind, baseURL string, cred *string, err error) {
	if err := modelrule.CheckProvider(r.GetName()); err != nil {
		return "", "", nil, invalid("name", "%v", err)
	}
	if kind, err = enumColumn("kind", r.GetKind()); err != nil {
		return "", "", nil, err
	}
	if r.GetBaseUrl() != "" {
		if baseURL, err = checkBaseURL(r.GetBaseUrl()); err != nil {
			return "", "", nil, invalid("base_url", "%v", err)
		}
	}
	if r.Credential != nil {
		c := strings.TrimSpace(r.GetCredential())
		for i := 0; i < len(c); i++ {
			if c[i] <= ' ' || c[i] == 0x7f {
				// Never echo any of it: it is a secret.
				return "", "", nil, invalid("credential", "holds a space or a control character (a key is one word)")
			}
		}
		cred = &c
	}
	return kind, baseURL, cred, nil
}

// checkBaseURL reads a provider's base URL: http(s), a host, no user,
// query or fragment; without a trailing slash.
func checkBaseURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "", errors.New("not a URL")
	case u.Scheme != "https" && u.Scheme != "http":
		return "", fmt.Errorf("scheme %q: https (or http) only", u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return "", errors.New("no host")
	case u.User != nil:
		return "", errors.New("a base URL carries no user or password (the credential is its own field)")
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return "", errors.New("a base URL has no query or fragment")
	}
	return strings.TrimRight(u.Scheme+"://"+u.Host+u.EscapedPath(), "/"), nil
}
