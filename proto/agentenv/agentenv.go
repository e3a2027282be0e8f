// Package agentenv is the one rule for a group's agent environment (set
// by an operator, non-secret): which names the runner owns. The server
// refuses setting them and the runner never lets a group's value replace
// its own: they are how the agent finds its gateway, its way out, its
// model endpoint and its CA roots.
package agentenv

import "strings"

// reservedPrefixes and reservedNames are the runner's (compared without case).
var (
	reservedPrefixes = []string{"CLAWGUARD_", "ANTHROPIC_", "OPENAI_"}
	reservedNames    = []string{"HOME", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "NODE_USE_ENV_PROXY",
		"SSL_CERT_FILE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "GIT_SSL_CAINFO", "PIP_CERT"}
)

// Reserved reports whether the runner owns name.
func Reserved(name string) bool {
	up := strings.ToUpper(name)
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(up, p) {
			return true
		}
	}
	for _, n := range reservedNames {
		if up == n {
			return true
		}
	}
	return false
}
