package delivery

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
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

// payloadCases are payloads each action's schema must accept ("" ) or
// refuse (a substring of the message the agent is told).
func payloadCases() []struct {
	name, action string
	in           map[string]any
	want         string
} {
	many := make([]any, 21)
	for i := range many {
		many[i] = "pkg"
	}
	ten := many[:10]
	eleven := many[:11]
	return []struct {
		name, action string
		in           map[string]any
		want         string
	}{
		{"apt ok", "install_packages", map[string]any{"apt": []any{"cowsay", "g++", "lib.x-1"}}, ""},
		{"npm scoped ok", "install_packages", map[string]any{"npm": []any{"@scope/pkg", "left-pad"}}, ""},
		{"apt null npm ok", "install_packages", map[string]any{"apt": nil, "npm": []any{"x"}, "reason": "why"}, ""},
		{"none", "install_packages", map[string]any{}, "1 to 20 packages"},
		{"empty lists", "install_packages", map[string]any{"apt": []any{}, "npm": nil}, "1 to 20 packages"},
		{"too many apt", "install_packages", map[string]any{"apt": many}, "maxItems"},
		{"exactly 20", "install_packages", map[string]any{"apt": many[:20]}, ""},
		{"10 and 10", "install_packages", map[string]any{"apt": ten, "npm": ten}, ""},
		{"10 and 11", "install_packages", map[string]any{"apt": ten, "npm": eleven}, "maxItems"},
		{"11 and 10", "install_packages", map[string]any{"apt": eleven, "npm": ten}, "maxItems"},
		{"bad apt", "install_packages", map[string]any{"apt": []any{"Bad;rm -rf"}}, `apt[]: pattern: "Bad;rm -rf"`},
		{"apt leading dash", "install_packages", map[string]any{"apt": []any{"-x"}}, "pattern"},
		{"bad npm", "install_packages", map[string]any{"npm": []any{"@/x"}}, "pattern"},
		{"npm uppercase", "install_packages", map[string]any{"npm": []any{"LeftPad"}}, "pattern"},
		{"apt not a list", "install_packages", map[string]any{"apt": "cowsay"}, "type"},
		{"apt numbers", "install_packages", map[string]any{"apt": []any{1.0}}, "type"},
		{"reason not a string", "install_packages", map[string]any{"apt": []any{"x"}, "reason": 3.0}, "type"},
		{"mcp ok", "add_mcp_server", map[string]any{"name": "fs", "command": "mcp-fs", "args": []any{"/w"}, "env": map[string]any{"A": "b"}}, ""},
		{"mcp no command", "add_mcp_server", map[string]any{"name": "fs"}, `"command"`},
		{"mcp no name", "add_mcp_server", map[string]any{"command": "x"}, `"name"`},
		{"mcp empty name", "add_mcp_server", map[string]any{"name": "", "command": "x"}, "pattern"},
		{"mcp env not strings", "add_mcp_server", map[string]any{"name": "fs", "command": "x", "env": map[string]any{"A": 1.0}}, "type"},
		{"mcp env null", "add_mcp_server", map[string]any{"name": "fs", "command": "x", "env": nil}, "type"},
		{"mcp args not strings", "add_mcp_server", map[string]any{"name": "fs", "command": "x", "args": []any{true}}, "type"},
		{"create ok", "create_agent", map[string]any{"name": "helper"}, ""},
		{"create empty", "create_agent", map[string]any{"name": "  "}, "pattern"},
		{"create nbsp", "create_agent", map[string]any{"name": "\u00a0\u3000"}, "pattern"},
		{"create missing", "create_agent", map[string]any{}, `"name"`},
		{"create with instructions", "create_agent", map[string]any{"name": "helper", "instructions": "be brief"}, ""},
		{"create instructions not a string", "create_agent", map[string]any{"name": "helper", "instructions": []any{"x"}}, "type"},
		{"create instructions at the bound", "create_agent", map[string]any{"name": "h", "instructions": strings.Repeat("\U0001F600", MaxInstructions)}, ""},
		{"create instructions too long", "create_agent", map[string]any{"name": "helper", "instructions": strings.Repeat("x", MaxInstructions+1)}, "maxLength"},
		{"send ok", "send_message", map[string]any{"to": "g2", "text": "hi"}, ""},
		{"send payload only", "send_message", map[string]any{"to": "g2", "payload": map[string]any{"k": 1.0}}, ""},
		{"send no target", "send_message", map[string]any{"text": "hi"}, `"to"`},
		{"send empty", "send_message", map[string]any{"to": "g2"}, "text or payload"},
		{"send empty text", "send_message", map[string]any{"to": "g2", "text": ""}, "text or payload"},
		{"send text too long", "send_message", map[string]any{"to": "g2", "text": strings.Repeat("x", MaxMessageText+1)}, "maxLength"},
	}
}

func schemaRegistry(t *testing.T) *Registry {
	r := NewRegistry(nil)
	for name, s := range map[string]*jsonschema.Schema{
		"install_packages": InstallPackagesSchema(), "add_mcp_server": AddMCPServerSchema(),
		"create_agent": CreateAgentSchema(), "send_message": SendMessageSchema(),
	} {
		r.MustRegister(Action{Name: name, Schema: s, Run: run})
	}
	return r
}

func TestPayloadSchemas(t *testing.T) {
	r := schemaRegistry(t)
	for _, c := range payloadCases() {
		t.Run(c.name, func(t *testing.T) {
			err := r.Validate(sess, c.action, mustStruct(t, c.in))
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("err = %v, want %q", err, c.want)
			case err != nil && !strings.HasPrefix(err.Error(), c.action+" failed: "):
				t.Fatalf("err = %v, want it to name the action", err)
			}
		})
	}
}

// TestServedSchemaIsTheValidatedSchema: what ListActions serves, read back
// by a validator of its own, refuses exactly what the engine refuses.
func TestServedSchemaIsTheValidatedSchema(t *testing.T) {
	r := schemaRegistry(t)
	served := map[string]*jsonschema.Resolved{}
	for _, spec := range r.Specs() {
		var s jsonschema.Schema
		if err := json.Unmarshal([]byte(spec.GetInputSchemaJson()), &s); err != nil {
			t.Fatalf("%s: served schema: %v", spec.GetName(), err)
		}
		if s.Schema != Draft || s.Type != "object" {
			t.Fatalf("%s: served schema %s", spec.GetName(), spec.GetInputSchemaJson())
		}
		res, err := s.Resolve(nil)
		if err != nil {
			t.Fatalf("%s: %v", spec.GetName(), err)
		}
		served[spec.GetName()] = res
	}
	if len(served) != 4 {
		t.Fatalf("specs = %v", r.Specs())
	}
	for _, c := range payloadCases() {
		p := mustStruct(t, c.in)
		engine := r.Validate(sess, c.action, p) == nil
		agent := served[c.action].Validate(p.AsMap()) == nil
		if engine != agent || engine != (c.want == "") {
			t.Errorf("%s: engine accepts %v, served schema accepts %v", c.name, engine, agent)
		}
	}
}

func TestNonBlankIsTrimSpace(t *testing.T) {
	re := regexp.MustCompile(NonBlank)
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if utf8.ValidRune(r) && re.MatchString(string(r)) == unicode.IsSpace(r) {
			t.Fatalf("NonBlank on %U: match %v, unicode.IsSpace %v", r, re.MatchString(string(r)), unicode.IsSpace(r))
		}
	}
}

func TestUnschemedActionTakesAnyObject(t *testing.T) {
	r := NewRegistry(nil)
	r.MustRegister(Action{Name: "free", Run: run})
	if err := r.Validate(sess, "free", mustStruct(t, map[string]any{"x": 1.0})); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(Action{Name: "bad", Schema: &jsonschema.Schema{Type: "string"}, Run: run}); err == nil {
		t.Fatal("a payload schema that is not an object was registered")
	}
}
