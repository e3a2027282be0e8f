// Package agentenv is the one rule for a group's agent environment (set
// by an operator, non-secret): which names the runner owns. The server
// refuses setting them and the runner never lets a group's value replace
// its own: they are how the agent finds its gateway, its way out, its
// model endpoint and its CA roots.
package agentenv

import "strings"

// reserved are the runner's names (compared without case): how the agent
// finds its gateway, workspace and identity, its way out, its model
// endpoint and the key worthless outside its session, its HOME and its CA
// roots. Other CLAWGUARD_*, ANTHROPIC_* and OPENAI_* names (a demo
// script, a model to use) are the group's to set.
var reserved = []string{
	"CLAWGUARD_GATEWAY_SOCKET", "CLAWGUARD_WORKSPACE", "CLAWGUARD_SESSION_ID", "CLAWGUARD_GROUP_ID",
	"CLAWGUARD_EGRESS_SOCKET", "CLAWGUARD_EGRESS_LISTEN",
	"HOME", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "NODE_USE_ENV_PROXY",
	"ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_KEY",
	"SSL_CERT_FILE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "GIT_SSL_CAINFO", "PIP_CERT",
}

// Reserved reports whether the runner owns name.
func Reserved(name string) bool {
	up := strings.ToUpper(name)
	for _, n := range reserved {
		if up == n {
			return true
		}
	}
	return false
}
