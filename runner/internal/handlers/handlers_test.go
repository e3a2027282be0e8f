package handlers

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/clawguard/clawguard/runner/internal/delivery"
)

func TestCLIRequestReachesOnlyAdminCommands(t *testing.T) {
	cases := map[string]string{ // method → "" ok, else error substring
		"ListGroups":                    "",
		"Registry/AddDestination":       "",
		"guard.v1.Approvals/List":       "",
		"/guard.v1.Registry/GetSession": "",
		"RegisterRunner":                "not an admin command",
		"ApplyAction":                   "not an admin command",
		"OpenSession":                   "not an admin command",
		"Approvals/Resolve":             "not an admin command",
		"Guard/Decide":                  "unknown command",
		"Nope":                          "unknown command",
		"":                              "method is required",
	}
	for m, want := range cases {
		p, _ := structpb.NewStruct(map[string]any{"method": m})
		md, err := resolveMethod(p)
		switch {
		case want == "" && (err != nil || md == nil):
			t.Errorf("%q: %v", m, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%q: err = %v, want %q", m, err, want)
		}
	}
	p, _ := structpb.NewStruct(map[string]any{"method": "ListGroups", "request": "x"})
	if _, err := resolveMethod(p); err == nil {
		t.Error("a non-object request was accepted")
	}
}

func TestRegisterMapsEveryPrivilegedAction(t *testing.T) {
	reg := delivery.NewRegistry(nil)
	if err := Register(reg, Deps{Conn: (*grpc.ClientConn)(nil)}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		CreateAgent: "agents.create", InstallPackages: "self_mod.install_packages",
		AddMCPServer: "self_mod.add_mcp_server", SendMessage: "a2a.send", CLIRequest: "", Reply: "",
	}
	m := reg.Manifest()
	if len(m) != len(want) {
		t.Fatalf("manifest %v", m)
	}
	for _, d := range m {
		if w, ok := want[d.GetName()]; !ok || w != d.GetCatalogAction() {
			t.Errorf("%s maps to %q, want %q", d.GetName(), d.GetCatalogAction(), w)
		}
	}
	// Registering the same set again (with mappings) is fine; disarming is not.
	if err := reg.Register(delivery.Action{Name: SendMessage, Run: func(context.Context, delivery.Call) delivery.Outcome { return delivery.Outcome{} }}); err == nil {
		t.Fatal("disarmed send_message")
	}
}
