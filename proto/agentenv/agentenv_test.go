package agentenv

import "testing"

func TestReserved(t *testing.T) {
	for _, n := range []string{"CLAWGUARD_SESSION_ID", "https_proxy", "HTTPS_PROXY", "Anthropic_Base_Url", "OPENAI_API_KEY", "ANTHROPIC_AUTH_TOKEN", "HOME", "SSL_CERT_FILE"} {
		if !Reserved(n) {
			t.Errorf("%s is not reserved", n)
		}
	}
	for _, n := range []string{"PATH", "LANG", "GIT_AUTHOR_NAME", "TASK", "HOMEPAGE", "CLAWGUARD_DEMO_SCRIPT", "ANTHROPIC_MODEL"} {
		if Reserved(n) {
			t.Errorf("%s is reserved", n)
		}
	}
}
