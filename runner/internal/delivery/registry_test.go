package delivery

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
)

func run(context.Context, Call) Outcome { return Done(nil, "") }

func TestRegisterRefusesToDisarmAGuardedAction(t *testing.T) {
	r := NewRegistry(nil)
	guarded := Action{Name: "test_guarded", CatalogAction: "test.guarded", ApprovalKind: "test", Run: run}
	if err := r.Register(guarded); err != nil {
		t.Fatal(err)
	}
	err := r.Register(Action{Name: "test_guarded", Run: run})
	if err == nil || !strings.Contains(err.Error(), "disarm the guard") {
		t.Fatalf("re-register without mapping: err = %v, want disarm error", err)
	}
	if a, _ := r.Get("test_guarded"); a.CatalogAction != "test.guarded" {
		t.Fatalf("guarded action was replaced: %+v", a)
	}
	// Replacing with a mapping stays allowed: the action remains guarded.
	if err := r.Register(guarded); err != nil {
		t.Fatalf("re-register with mapping: %v", err)
	}
	// An unmapped action may be replaced by an unmapped one.
	if err := r.Register(Action{Name: "plain", Run: run}); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(Action{Name: "plain", Run: run}); err != nil {
		t.Fatalf("replace unmapped: %v", err)
	}
}

func TestRegisterValidates(t *testing.T) {
	r := NewRegistry(nil)
	if err := r.Register(Action{Name: "x"}); err == nil {
		t.Fatal("action without Run registered")
	}
	if err := r.Register(Action{Name: "x", CatalogAction: "a.b", Run: run}); err == nil {
		t.Fatal("guarded action without approval kind registered")
	}
}

func TestManifestIsDerivedFromTheRegistry(t *testing.T) {
	r := NewRegistry(nil)
	r.MustRegister(Action{Name: "send_message", CatalogAction: "a2a.send", ApprovalKind: "a2a_message_gate", Run: run})
	r.MustRegister(Action{Name: "cli_request", Run: run})
	m := r.Manifest()
	if len(m) != 2 || m[0].GetName() != "cli_request" || m[0].GetCatalogAction() != "" ||
		m[1].GetName() != "send_message" || m[1].GetCatalogAction() != "a2a.send" {
		t.Fatalf("manifest = %v", m)
	}
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestPrechecks(t *testing.T) {
	many := make([]any, 21)
	for i := range many {
		many[i] = "pkg"
	}
	cases := []struct {
		name  string
		check func(*structpb.Struct) error
		in    map[string]any
		want  string // "" = ok; else a substring of the error
	}{
		{"apt ok", CheckInstallPackages, map[string]any{"apt": []any{"cowsay", "g++", "lib.x-1"}}, ""},
		{"npm scoped ok", CheckInstallPackages, map[string]any{"npm": []any{"@scope/pkg", "left-pad"}}, ""},
		{"none", CheckInstallPackages, map[string]any{}, "at least one"},
		{"too many", CheckInstallPackages, map[string]any{"apt": many}, "max 20"},
		{"exactly 20", CheckInstallPackages, map[string]any{"apt": many[:20]}, ""},
		{"bad apt", CheckInstallPackages, map[string]any{"apt": []any{"Bad;rm -rf"}}, `invalid apt package name "Bad;rm -rf"`},
		{"apt leading dash", CheckInstallPackages, map[string]any{"apt": []any{"-x"}}, "invalid apt"},
		{"bad npm", CheckInstallPackages, map[string]any{"npm": []any{"@/x"}}, "invalid npm"},
		{"npm uppercase", CheckInstallPackages, map[string]any{"npm": []any{"LeftPad"}}, "invalid npm"},
		{"apt not a list", CheckInstallPackages, map[string]any{"apt": "cowsay"}, "list of strings"},
		{"apt numbers", CheckInstallPackages, map[string]any{"apt": []any{1.0}}, "list of strings"},
		{"mcp ok", CheckAddMCPServer, map[string]any{"name": "fs", "command": "mcp-fs", "args": []any{"/w"}, "env": map[string]any{"A": "b"}}, ""},
		{"mcp no command", CheckAddMCPServer, map[string]any{"name": "fs"}, "name and command are required"},
		{"mcp no name", CheckAddMCPServer, map[string]any{"command": "x"}, "name and command are required"},
		{"mcp env not strings", CheckAddMCPServer, map[string]any{"name": "fs", "command": "x", "env": map[string]any{"A": 1.0}}, "must be a string"},
		{"create ok", CheckCreateAgent, map[string]any{"name": "helper"}, ""},
		{"create empty", CheckCreateAgent, map[string]any{"name": "  "}, "name is required"},
		{"create missing", CheckCreateAgent, map[string]any{}, "name is required"},
		{"create with instructions", CheckCreateAgent, map[string]any{"name": "helper", "instructions": "be brief"}, ""},
		{"create instructions not a string", CheckCreateAgent, map[string]any{"name": "helper", "instructions": []any{"x"}}, "instructions must be a string"},
		{"create instructions too long", CheckCreateAgent, map[string]any{"name": "helper", "instructions": strings.Repeat("x", MaxInstructions+1)}, "instructions longer than"},
		{"send ok", CheckSendMessage, map[string]any{"to": "g2", "text": "hi"}, ""},
		{"send no target", CheckSendMessage, map[string]any{"text": "hi"}, "to (the target"},
		{"send empty", CheckSendMessage, map[string]any{"to": "g2"}, "text or payload"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.check(mustStruct(t, c.in))
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
}
