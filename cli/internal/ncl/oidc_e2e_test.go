package ncl

import (
	"strings"
	"testing"
)

// Issue 34: the operator binds an OIDC identity to a user by name or id;
// `users get` lists it; the same subject cannot be bound to a second user;
// unbind removes it, and unbinding it again is refused.
func TestBindOidcByNameAndUsersGetListsIt(t *testing.T) {
	srv := startRealServer(t)
	srv.must(t, "users", "create", "telegram:dana", "--display-name", "Dana")
	srv.must(t, "users", "create", "telegram:erin", "--display-name", "Erin")
	const iss, sub = "https://accounts.example.com", "248289761001"

	b := jsonObj(t, srv.must(t, "users", "bind-oidc", "Dana", "--issuer", iss, "--subject", sub, "-o", "json"))
	if b["user_id"] != "telegram:dana" || b["issuer"] != iss || b["subject"] != sub {
		t.Fatalf("bind-oidc Dana = %v", b)
	}
	if out := srv.must(t, "users", "get", "telegram:dana"); !strings.Contains(out, iss+" "+sub) {
		t.Fatalf("users get lacks the binding:\n%s", out)
	}
	if r := srv.ncl(t, "users", "bind-oidc", "Erin", "--issuer", iss, "--subject", sub); r.code == ExitOK || !strings.Contains(r.err, "unbind it first") {
		t.Fatalf("binding Dana's subject to Erin: exit %d %q", r.code, r.err)
	}
	if r := srv.ncl(t, "users", "bind-oidc", "Erin", "--issuer", "http://idp.example.com", "--subject", "x"); r.code == ExitOK || !strings.Contains(r.err, "issuer") {
		t.Fatalf("a plain-http issuer: exit %d %q", r.code, r.err)
	}
	srv.must(t, "users", "unbind-oidc", "Dana", "--issuer", iss, "--subject", sub)
	if out := srv.must(t, "users", "get", "Dana"); strings.Contains(out, sub) {
		t.Fatalf("users get after unbind:\n%s", out)
	}
	if r := srv.ncl(t, "users", "unbind-oidc", "Dana", "--issuer", iss, "--subject", sub); r.code == ExitOK {
		t.Fatalf("unbinding twice succeeded")
	}
}
