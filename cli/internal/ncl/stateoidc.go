package ncl

import (
	"context"
	"fmt"
	"slices"
	"strings"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// The console sign-ins of a user in the document: the (issuer, subject)
// pairs bound to them (ncl users bind-oidc; the operator's).

type oidcSpec struct {
	Issuer  string `yaml:"issuer"`
	Subject string `yaml:"subject"`
}

func (o oidcSpec) String() string { return o.Issuer + " " + o.Subject }

// readOIDC fills in each user's bindings (GetUser carries them).
func readOIDC(ctx context.Context, c *clients, users []userSpec) error {
	for i := range users {
		r, err := c.reg.GetUser(ctx, &guardv1.GetUserRequest{Id: users[i].ID})
		if err != nil {
			return fmt.Errorf("read user %s: %w", users[i].ID, err)
		}
		for _, b := range r.GetUser().GetOidcBindings() {
			users[i].OIDC = append(users[i].OIDC, oidcSpec{Issuer: b.GetIssuer(), Subject: b.GetSubject()})
		}
		slices.SortFunc(users[i].OIDC, func(a, b oidcSpec) int { return strings.Compare(a.String(), b.String()) })
	}
	return nil
}

// planOIDC lists the bindings want adds (after the users exist) and those it
// drops (deletions: with --prune).
func planOIDC(cur, want []userSpec) (changes, dels []change) {
	have := map[string][]oidcSpec{}
	for _, u := range cur {
		have[u.ID] = u.OIDC
	}
	for _, u := range want {
		for _, b := range u.OIDC {
			if slices.Contains(have[u.ID], b) {
				continue
			}
			changes = append(changes, change{'+', fmt.Sprintf("oidc sign-in of user %s: %s", u.ID, b), func(ctx context.Context, c *clients, _ groupBook) error {
				_, err := c.reg.BindOidc(ctx, &guardv1.BindOidcRequest{UserId: u.ID, Issuer: b.Issuer, Subject: b.Subject})
				return err
			}})
		}
	}
	for _, u := range cur {
		i := slices.IndexFunc(want, func(w userSpec) bool { return w.ID == u.ID })
		if i < 0 {
			continue // the user is not deleted (users never are), nor their sign-ins
		}
		for _, b := range u.OIDC {
			if slices.Contains(want[i].OIDC, b) {
				continue
			}
			dels = append(dels, change{'-', fmt.Sprintf("oidc sign-in of user %s: %s", u.ID, b), func(ctx context.Context, c *clients, _ groupBook) error {
				_, err := c.reg.UnbindOidc(ctx, &guardv1.UnbindOidcRequest{UserId: u.ID, Issuer: b.Issuer, Subject: b.Subject})
				return err
			}})
		}
	}
	return changes, dels
}
