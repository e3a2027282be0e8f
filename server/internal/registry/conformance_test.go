package registry

import (
	"slices"
	"strings"
	"testing"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// fakeCatalog knows the delivery catalog actions (unit test only; the CI
// walk against the real server catalog is in registry_test.go).
var fakeCatalog = CatalogFunc(func(a string) bool {
	return slices.Contains([]string{"agents.create", "self_mod.install_packages", "self_mod.add_mcp_server", "a2a.send"}, a)
})

func decl(name, mapped string) *guardv1.DeliveryActionDecl {
	return &guardv1.DeliveryActionDecl{Name: name, CatalogAction: mapped}
}

func TestViolationsRepresentativeManifestIsClean(t *testing.T) {
	m := []*guardv1.DeliveryActionDecl{
		decl("create_agent", "agents.create"),
		decl("install_packages", "self_mod.install_packages"),
		decl("add_mcp_server", "self_mod.add_mcp_server"),
		decl("send_message", "a2a.send"),
		decl("cli_request", ""),
		decl("schedule_task", ""),
	}
	if v := Violations(m, fakeCatalog); len(v) != 0 {
		t.Fatalf("violations = %q, want none", v)
	}
}

func TestViolationsListsEveryViolation(t *testing.T) {
	m := []*guardv1.DeliveryActionDecl{
		decl("create_agent", "agents.create"),
		decl("rogue_privileged_action", ""),
		decl("install_packages", "self_mod.install_pkgs"),
		decl("cli_request", ""),
		decl("", "a2a.send"),
		decl("send_message", "a2a.send"),
		decl("send_message", ""),
	}
	v := Violations(m, fakeCatalog)
	want := []string{
		`delivery action "rogue_privileged_action" is neither guard-mapped nor on the declared exemption list`,
		`delivery action "install_packages" maps to unregistered guard action "self_mod.install_pkgs"`,
		"a delivery action has no name",
		`delivery action "send_message" is declared twice with different mappings ("a2a.send", "")`,
	}
	if !slices.Equal(v, want) {
		t.Fatalf("violations =\n%s\nwant\n%s", strings.Join(v, "\n"), strings.Join(want, "\n"))
	}
}

func TestViolationsNilCatalogFailsClosed(t *testing.T) {
	v := Violations([]*guardv1.DeliveryActionDecl{decl("create_agent", "agents.create"), decl("cli_request", "")}, nil)
	if len(v) != 1 || !strings.Contains(v[0], "create_agent") {
		t.Fatalf("violations = %q, want the one mapped action refused", v)
	}
}

func TestExemptionListIsTheServers(t *testing.T) {
	for _, a := range []string{"cli_request", "reply", "schedule_task", "cancel_task", "pause_task", "resume_task", "update_task"} {
		if !IsExempt(a) {
			t.Errorf("%s should be exempt", a)
		}
	}
	for _, a := range []string{"create_agent", "install_packages", "add_mcp_server", "send_message", ""} {
		if IsExempt(a) {
			t.Errorf("%s must not be exempt", a)
		}
	}
}
