package ncl

import (
	"testing"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// --mode takes the enum's words, and "" or "inherit" (what tables print); anything else is a usage
// error, never a silent enforce.
func TestParseMode(t *testing.T) {
	for in, want := range map[string]guardv1.EnforcementMode{
		"":        guardv1.EnforcementMode_ENFORCEMENT_MODE_UNSPECIFIED,
		"inherit": guardv1.EnforcementMode_ENFORCEMENT_MODE_UNSPECIFIED, // as the tables print it
		"enforce": guardv1.EnforcementMode_ENFORCEMENT_MODE_ENFORCE,
		"audit":   guardv1.EnforcementMode_ENFORCEMENT_MODE_AUDIT,
		"warn":    guardv1.EnforcementMode_ENFORCEMENT_MODE_WARN,
	} {
		if got, err := parseMode(in); err != nil || got != want {
			t.Errorf("parseMode(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"block", "unspecified", "ENFORCEMENT_MODE_WARN", "Warn"} {
		if got, err := parseMode(in); err == nil {
			t.Errorf("parseMode(%q) = %v, want a usage error", in, got)
		}
	}
}
