package mcpcall

import (
	"regexp"
	"strings"
	"testing"
)

func TestDigestBindsServerToolAndArguments(t *testing.T) {
	base, err := Digest("fs", "write_file", map[string]any{"path": "a.txt", "content": "hi", "n": 1.0})
	if err != nil {
		t.Fatal(err)
	}
	same, _ := Digest("fs", "write_file", map[string]any{"n": 1.0, "content": "hi", "path": "a.txt"})
	if same != base {
		t.Fatalf("key order changed the digest: %s vs %s", same, base)
	}
	for name, d := range map[string][3]any{
		"another server":   {"fs2", "write_file", map[string]any{"path": "a.txt", "content": "hi", "n": 1.0}},
		"another tool":     {"fs", "read_file", map[string]any{"path": "a.txt", "content": "hi", "n": 1.0}},
		"another argument": {"fs", "write_file", map[string]any{"path": "b.txt", "content": "hi", "n": 1.0}},
		"an extra one":     {"fs", "write_file", map[string]any{"path": "a.txt", "content": "hi", "n": 1.0, "mode": "0777"}},
		"another number":   {"fs", "write_file", map[string]any{"path": "a.txt", "content": "hi", "n": 2.0}},
	} {
		got, err := Digest(d[0].(string), d[1].(string), d[2].(map[string]any))
		if err != nil || got == base {
			t.Errorf("%s: digest %s (err %v), want one other than %s", name, got, err, base)
		}
	}
	empty, _ := Digest("fs", "list", nil)
	if e2, _ := Digest("fs", "list", map[string]any{}); e2 != empty {
		t.Fatal("absent and empty arguments differ")
	}
}

func TestNames(t *testing.T) {
	for _, ok := range []string{"fs", "github.com-mcp", "a_b.c"} {
		if !ValidServer(ok) {
			t.Errorf("server %q refused", ok)
		}
	}
	for _, bad := range []string{"", "-x", "a b", "a/b", "../x"} {
		if ValidServer(bad) {
			t.Errorf("server %q accepted", bad)
		}
	}
	if !ValidTool("write_file") || ValidTool("") || ValidTool("a b") || ValidTool("a\x00") {
		t.Fatal("tool name rule")
	}
}

func TestResolve(t *testing.T) {
	for _, c := range []struct {
		name         string
		tool, server Setting
		want         Effective
	}{
		{"nothing set holds", Setting{}, Setting{}, Effective{Effect: EffectHold, Source: FromBuiltIn}},
		{"server default", Setting{}, Setting{Effect: EffectAllow}, Effective{Effect: EffectAllow, Source: FromServerDefault}},
		{"tool wins", Setting{Effect: EffectDeny}, Setting{Effect: EffectAllow}, Effective{Effect: EffectDeny, Source: FromTool}},
		{"quorum and mode from the tool", Setting{Effect: EffectHold, Approvals: 2, Mode: "audit"}, Setting{Effect: EffectAllow, Approvals: 3, Mode: "warn"},
			Effective{Effect: EffectHold, Source: FromTool, Approvals: 2, Mode: "audit"}},
		{"inherited from the default", Setting{Effect: EffectHold}, Setting{Approvals: 3, Mode: "warn"},
			Effective{Effect: EffectHold, Source: FromTool, Approvals: 3, Mode: "warn"}},
		{"unknown effect holds", Setting{Effect: "maybe"}, Setting{}, Effective{Effect: EffectHold, Source: FromTool}},
	} {
		if got := Resolve(c.tool, c.server); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// The hand-written name checks say what the rules' regular expressions
// say, on names built to probe every edge: lengths, first characters,
// punctuation, white space and controls, non-ASCII and invalid UTF-8.
func TestNameChecksAreTheRules(t *testing.T) {
	server := regexp.MustCompile(ServerPattern)
	tool := regexp.MustCompile(`^[^\x00-\x20\x7f]{1,256}$`)
	parts := []string{"", "a", "Z", "0", ".", "_", "-", " ", "\t", "\x00", "\x7f", "é", "日本", "\xff", "/", ":", "~"}
	names := []string{strings.Repeat("a", 128), strings.Repeat("a", 129), strings.Repeat("é", 256), strings.Repeat("é", 257),
		strings.Repeat("x", 256), strings.Repeat("x", 257)}
	for _, a := range parts {
		for _, b := range parts {
			for _, c := range parts {
				names = append(names, a+b+c)
			}
		}
	}
	for _, n := range names {
		if got, want := ValidServer(n), server.MatchString(n); got != want {
			t.Errorf("ValidServer(%q) = %v, the rule says %v", n, got, want)
		}
		if got, want := ValidTool(n), tool.MatchString(n); got != want {
			t.Errorf("ValidTool(%q) = %v, the rule says %v", n, got, want)
		}
	}
}
