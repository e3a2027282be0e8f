package enumword_test

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

func TestWordsAreTheStoredValues(t *testing.T) {
	// The database's CHECK constraints spell these; a rename of an enum
	// value would change a stored word, so they are pinned here.
	cases := []struct {
		ed   protoreflect.EnumDescriptor
		want []string
	}{
		{guardv1.EnforcementMode(0).Descriptor(), []string{"enforce", "audit", "warn"}},
		{guardv1.Effect(0).Descriptor(), []string{"allow", "hold", "deny"}},
		{guardv1.HoldStatus(0).Descriptor(), []string{"pending", "approved", "rejected", "expired", "swept"}},
		{guardv1.Outcome(0).Descriptor(), []string{"approve", "reject", "expire", "sweep"}},
		{guardv1.Principal(0).Descriptor(), []string{"operator", "runner", "bridge", "user"}},
		{guardv1.CliScope(0).Descriptor(), []string{"disabled", "group", "global"}},
		{guardv1.SenderPolicy(0).Descriptor(), []string{"public", "request_approval", "strict"}},
		{guardv1.Role(0).Descriptor(), []string{"owner", "admin"}},
		{guardv1.ApproverScope(0).Descriptor(), []string{"group", "global"}},
		{guardv1.SessionStatus(0).Descriptor(), []string{"active", "stopped"}},
		{guardv1.ChatMessageKind(0).Descriptor(), []string{"reply", "notice"}},
	}
	for _, c := range cases {
		if got := enumword.Words(c.ed); !slices.Equal(got, c.want) {
			t.Errorf("%s: words %q, want %q", c.ed.Name(), got, c.want)
		}
	}
}

// Every value of every API enum converts to its word and back.
func TestRoundTripEveryEnum(t *testing.T) {
	files := []protoreflect.FileDescriptor{
		guardv1.File_guard_v1_common_proto, guardv1.File_guard_v1_registry_proto,
		guardv1.File_guard_v1_approvals_proto, guardv1.File_guard_v1_options_proto,
		agentv1.File_agent_v1_gateway_proto,
	}
	seen := 0
	for _, f := range files {
		for i := 0; i < f.Enums().Len(); i++ {
			ed := f.Enums().Get(i)
			for j := 0; j < ed.Values().Len(); j++ {
				n := ed.Values().Get(j).Number()
				w, err := enumword.WordOf(ed, n)
				if err != nil {
					t.Fatalf("%s %d: %v", ed.Name(), n, err)
				}
				if (n == 0) != (w == "") {
					t.Errorf("%s %d: word %q (only the zero value is empty)", ed.Name(), n, w)
				}
				back, err := enumword.NumberOf(ed, w)
				if err != nil || back != n {
					t.Errorf("%s %q: back to %d, %v (want %d)", ed.Name(), w, back, err, n)
				}
				seen++
			}
		}
	}
	if seen < 50 {
		t.Fatalf("only %d enum values walked: descriptors missing", seen)
	}
}

func TestTypedForms(t *testing.T) {
	m, err := enumword.Parse[guardv1.EnforcementMode]("warn")
	if err != nil || m != guardv1.EnforcementMode_ENFORCEMENT_MODE_WARN {
		t.Fatalf("Parse(warn) = %v, %v", m, err)
	}
	if m, err := enumword.Parse[guardv1.EnforcementMode](""); err != nil || m != guardv1.EnforcementMode_ENFORCEMENT_MODE_UNSPECIFIED {
		t.Fatalf("Parse(\"\") = %v, %v (want unspecified)", m, err)
	}
	if w, err := enumword.Word(guardv1.SenderPolicy_SENDER_POLICY_REQUEST_APPROVAL); err != nil || w != "request_approval" {
		t.Fatalf("Word = %q, %v", w, err)
	}
	if w, err := enumword.Word(guardv1.Effect_EFFECT_UNSPECIFIED); err != nil || w != "" {
		t.Fatalf("Word(unspecified) = %q, %v", w, err)
	}
	if p := enumword.Prefix(guardv1.SenderPolicy(0).Descriptor()); p != "SENDER_POLICY_" {
		t.Fatalf("Prefix = %q", p)
	}
}

// Fail closed: nothing but the exact words (and "" for unset) parses, and
// a number the descriptor does not know has no word.
func TestUnknownIsAnError(t *testing.T) {
	for _, s := range []string{"unspecified", "UNSPECIFIED", "ENFORCEMENT_MODE_WARN", "Warn", "WARN", " warn", "warn ", "block", "0", "1"} {
		if m, err := enumword.Parse[guardv1.EnforcementMode](s); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", s, m)
		}
	}
	for _, n := range []int32{-1, 4, 99} {
		e := guardv1.EnforcementMode(n)
		if w, err := enumword.Word(e); err == nil {
			t.Errorf("Word(%d) = %q, want an error", n, w)
		}
		if got := enumword.String(e); got == "" || got == "warn" {
			t.Errorf("String(%d) = %q, want the number", n, got)
		}
	}
	if got := enumword.String(guardv1.Outcome_OUTCOME_SWEEP); got != "sweep" {
		t.Errorf("String(sweep) = %q", got)
	}
}
