package api

import (
	"testing"
	"time"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/authn"
)

// A user a bridge acts for (bridge_as_user gives it a user principal with
// the chat's namespace as Via) has not stepped up: only a fresh console
// sign-in, or the person's own token, has.
func TestOnlyAFreshSignInOrOwnTokenIsAStepUp(t *testing.T) {
	user := authn.Principal{Kind: guardv1.Principal_PRINCIPAL_USER, UserID: "telegram:olivia"}
	for _, tc := range []struct {
		name   string
		caller authn.Caller
		want   bool
	}{
		{"own token", authn.Caller{Principal: user}, true},
		{"operator", authn.Caller{Principal: authn.Principal{Kind: guardv1.Principal_PRINCIPAL_OPERATOR}}, true},
		{"fresh console sign-in", authn.Caller{Principal: user, Via: "console", SignedIn: time.Now()}, true},
		{"stale console sign-in", authn.Caller{Principal: user, Via: "console", SignedIn: time.Now().Add(-time.Hour)}, false},
		{"a chat user a bridge acts for", authn.Caller{Principal: user, Via: "telegram"}, false},
		{"a bridge", authn.Caller{Principal: authn.Principal{Kind: guardv1.Principal_PRINCIPAL_BRIDGE}}, false},
	} {
		if got := steppedUp(tc.caller); got != tc.want {
			t.Errorf("%s: steppedUp = %v, want %v", tc.name, got, tc.want)
		}
	}
}
