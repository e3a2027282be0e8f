package resources_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// A token made to expire says when, in the list with the time it was last
// used; an expiry out of bounds is refused.
func TestTokenExpiryAndLastUseAreListed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, c := start(t)
	must[*guardv1.CreateUserResponse](t)(c.Registry.CreateUser(ctx, &guardv1.CreateUserRequest{Id: "tg:dana"}))
	made := must[*guardv1.CreateTokenResponse](t)(c.Registry.CreateToken(ctx, &guardv1.CreateTokenRequest{
		Kind: guardv1.Principal_PRINCIPAL_USER, UserId: "tg:dana", ExpiresIn: durationpb.New(90 * 24 * time.Hour)}))
	tok := made.GetToken()
	if got := tok.GetExpiresAt().AsTime().Sub(tok.GetCreatedAt().AsTime()); got != 90*24*time.Hour {
		t.Fatalf("expires %s after its creation, want 90 days", got)
	}
	if tok.GetLastUsedAt() != nil {
		t.Fatalf("a new token was last used at %v", tok.GetLastUsedAt())
	}
	for _, bad := range []time.Duration{time.Second, -time.Hour, 11 * 365 * 24 * time.Hour} {
		_, err := c.Registry.CreateToken(ctx, &guardv1.CreateTokenRequest{Kind: guardv1.Principal_PRINCIPAL_USER, UserId: "tg:dana", ExpiresIn: durationpb.New(bad)})
		wantCode(t, err, codes.InvalidArgument, "expires_in")
	}

	dana := testserver.ClientsFor(srv.Conn(t, made.GetSecret(), ""))
	if _, err := dana.Registry.ListGroups(ctx, &guardv1.ListGroupsRequest{}); err != nil {
		t.Fatalf("dana's first call: %v", err)
	}
	testserver.Eventually(t, 5*time.Second, "the token's last use to be stored", func() bool {
		return findToken(t, c, tok.GetId()).GetLastUsedAt() != nil
	})
	if used := findToken(t, c, tok.GetId()).GetLastUsedAt().AsTime(); time.Since(used) > time.Minute {
		t.Fatalf("last used at %s, not the call just made", used)
	}
}

// Issue 34: an expired token is refused on every replica, at its expiry —
// not a cache entry later, as a revocation may be.
func TestAnExpiredTokenIsRefusedOnEveryReplicaAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, c := start(t)
	b := testserver.StartOn(t, a.URL)
	must[*guardv1.CreateUserResponse](t)(c.Registry.CreateUser(ctx, &guardv1.CreateUserRequest{Id: "tg:erin"}))
	made := must[*guardv1.CreateTokenResponse](t)(c.Registry.CreateToken(ctx, &guardv1.CreateTokenRequest{
		Kind: guardv1.Principal_PRINCIPAL_USER, UserId: "tg:erin", ExpiresIn: durationpb.New(time.Hour)}))
	// The expiry brought close (the API's least is a minute): 1.5 s away.
	var expiry time.Time
	if err := a.Pool.QueryRow(ctx, `UPDATE tokens SET expires_at = now() + interval '1500 milliseconds' WHERE id = $1 RETURNING expires_at`,
		made.GetToken().GetId()).Scan(&expiry); err != nil {
		t.Fatal(err)
	}
	replicas := map[string]testserver.Clients{
		"a": testserver.ClientsFor(a.Conn(t, made.GetSecret(), "")),
		"b": testserver.ClientsFor(b.Conn(t, made.GetSecret(), "")),
	}
	for name, r := range replicas {
		// Accepted, and so cached, before the expiry.
		if _, err := r.Registry.ListGroups(ctx, &guardv1.ListGroupsRequest{}); err != nil {
			if time.Now().Before(expiry) {
				t.Fatalf("replica %s refused the token before its expiry: %v", name, err)
			}
		}
	}
	// Waiting for the clock is the point of the test: the answer cached a
	// moment ago must not outlive the expiry.
	time.Sleep(time.Until(expiry) + 10*time.Millisecond)
	for name, r := range replicas {
		_, err := r.Registry.ListGroups(ctx, &guardv1.ListGroupsRequest{})
		wantCode(t, err, codes.Unauthenticated, "")
		if !strings.Contains(err.Error(), "expired") {
			t.Errorf("replica %s: %v, want words saying the token expired", name, err)
		}
	}
}

func findToken(t *testing.T, c testserver.Clients, id string) *guardv1.Token {
	t.Helper()
	list := must[*guardv1.ListTokensResponse](t)(c.Registry.ListTokens(context.Background(), &guardv1.ListTokensRequest{})).GetTokens()
	for _, tok := range list {
		if tok.GetId() == id {
			return tok
		}
	}
	t.Fatalf("token %s not listed", id)
	return nil
}
