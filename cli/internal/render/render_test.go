package render

import (
	"bytes"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

func TestEnumWords(t *testing.T) {
	cases := map[string]string{
		enumword.String(guardv1.Effect_EFFECT_ALLOW):                         "allow",
		enumword.String(guardv1.Effect_EFFECT_DENY):                          "deny",
		enumword.String(guardv1.SenderPolicy_SENDER_POLICY_REQUEST_APPROVAL): "request_approval",
		enumword.String(guardv1.RoleScope_ROLE_SCOPE_GLOBAL):                 "global",
		enumword.String(guardv1.Effect_EFFECT_UNSPECIFIED):                   "",
	}
	for got, want := range cases {
		if got != want {
			t.Errorf("EnumWord = %q, want %q", got, want)
		}
	}
	ed := guardv1.SenderPolicy(0).Descriptor()
	for _, in := range []string{"request_approval", "request-approval", "REQUEST_APPROVAL", "SENDER_POLICY_REQUEST_APPROVAL"} {
		n, err := ParseEnum(ed, in)
		if err != nil || n != protoNum(guardv1.SenderPolicy_SENDER_POLICY_REQUEST_APPROVAL) {
			t.Errorf("ParseEnum(%q) = %v, %v", in, n, err)
		}
	}
	for _, in := range []string{"", "unspecified", "SENDER_POLICY_UNSPECIFIED", "open"} {
		if _, err := ParseEnum(ed, in); err == nil {
			t.Errorf("ParseEnum(%q) accepted", in)
		}
	}
}

func protoNum(e interface {
	Number() protoreflect.EnumNumber
}) protoreflect.EnumNumber {
	return e.Number()
}

// TestYAMLIsTheJSONValue: -o yaml prints the same fields and enum words as
// -o json, a list as a sequence, an event as one document.
func TestYAMLIsTheJSONValue(t *testing.T) {
	var b bytes.Buffer
	p := Printer{W: &b, JSON: true, YAML: true}
	if err := p.Object(&guardv1.Decision{Effect: guardv1.Effect_EFFECT_DENY, Reason: "no destination", DecidedBy: "baseline"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"effect: deny\n", "reason: no destination\n", "decided_by: baseline\n", "approver_scope: \"\"\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("yaml object lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := p.List(&guardv1.Decision{}, nil); err != nil || b.String() != "[]\n" {
		t.Errorf("empty yaml list: %q %v", b.String(), err)
	}
	b.Reset()
	if err := p.Event(&guardv1.WatchResponse{Cursor: 7, Type: guardv1.EventType_EVENT_TYPE_REQUESTED}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "---\n") || !strings.Contains(b.String(), "cursor: 7\n") || !strings.Contains(b.String(), "type: requested\n") {
		t.Errorf("yaml event:\n%s", b.String())
	}
}

// An approval whose approver is no longer eligible is listed but not counted.
func TestQuorumCountsOnlyEligibleApprovals(t *testing.T) {
	h := &guardv1.Hold{ApprovalsRequired: 2, Approvals: []*guardv1.HoldApproval{
		{UserId: "telegram:dana", Ineligible: true}, {UserId: "telegram:carol"}}}
	if got, want := Quorum(h), "1 of 2 (telegram:dana [no longer eligible: not counted], telegram:carol)"; got != want {
		t.Fatalf("Quorum = %q, want %q", got, want)
	}
}
