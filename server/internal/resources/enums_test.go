package resources

import (
	"testing"

	"github.com/clawguard/clawguard/server/internal/fault"

	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Enums fail closed both ways: a request's unknown value is InvalidArgument
// (nothing is written), a stored word nobody knows is an error (nothing is
// guessed: no "admin" for a bad role, no "strict" for a bad policy).
func TestEnumColumnsFailClosed(t *testing.T) {
	if w, err := enumColumn("mode", guardv1.EnforcementMode_ENFORCEMENT_MODE_AUDIT); err != nil || w != "audit" {
		t.Fatalf("enumColumn(audit) = %q, %v", w, err)
	}
	if w, err := enumColumn("mode", guardv1.EnforcementMode_ENFORCEMENT_MODE_UNSPECIFIED); err != nil || w != "" {
		t.Fatalf("enumColumn(unspecified) = %q, %v (want \"\": not set)", w, err)
	}
	_, err := enumColumn("unknown_sender_policy", guardv1.SenderPolicy(9))
	if !fault.Is(err, fault.Invalid) {
		t.Fatalf("enumColumn(9) = %v, want InvalidArgument", err)
	}
	if want := "unknown_sender_policy: unknown value 9 (want public, request_approval or strict)"; status.Convert(err).Message() != want {
		t.Errorf("message %q, want %q", status.Convert(err).Message(), want)
	}

	if p, err := enumFromColumn[guardv1.SenderPolicy]("unknown_sender_policy", "request_approval"); err != nil || p != guardv1.SenderPolicy_SENDER_POLICY_REQUEST_APPROVAL {
		t.Fatalf("enumFromColumn(request_approval) = %v, %v", p, err)
	}
	for _, bad := range []string{"bogus", "STRICT", "unspecified", "ROLE_OWNER"} {
		if r, err := enumFromColumn[guardv1.Role]("role", bad); err == nil {
			t.Errorf("enumFromColumn(%q) = %v, want an error", bad, r)
		}
	}
	if _, err := (GroupConfig{CLIScope: "everything"}).proto(); err == nil {
		t.Error("a stored cli_scope nobody knows read as a scope")
	}
	if c, err := (GroupConfig{}).proto(); err != nil || c.GetCliScope() != guardv1.CliScope_CLI_SCOPE_GROUP {
		t.Errorf("no config row: %v, %v (want group)", c.GetCliScope(), err)
	}
}
