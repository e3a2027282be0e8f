// Package mcpcall is the one rule for a guarded MCP tool call, shared by the
// runner that forwards it and the server that decides it: the names, the
// payload and resource keys, and the digest an approval is bound to.
package mcpcall

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// The names of a tool call in the runner's manifest and the guard's catalog.
const (
	DeliveryAction = "mcp_call" // what the agent sends (agent.v1 Send)
	CatalogAction  = "mcp.call" // what the guard decides
	ApprovalKind   = "mcp_call" // the hold kind of its grants
)

// Payload keys ({server, tool, arguments}) and decided-resource keys
// ({server, tool, digest}).
const (
	KeyServer    = "server"
	KeyTool      = "tool"
	KeyArguments = "arguments"
	KeyDigest    = "digest"
	// KeyClaim is the key the runner stamps on an approved call's replay:
	// its process's claim on running it, which the hold records once.
	KeyClaim = "claim"
)

// ServerPattern is the rule of a guarded MCP server's name (also the
// runner's add_mcp_server schema's pattern).
const ServerPattern = `^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`

// ValidServer reports whether name can name a guarded MCP server: the
// admin RPCs' rule for MCP server names, ServerPattern (it also names the
// server's container and data directory on the runner). Checked by hand:
// every allowed tool call asks, and a regular expression costs more.
func ValidServer(name string) bool {
	if len(name) == 0 || len(name) > 128 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return false
		}
	}
	return true
}

// ValidTool reports whether name can name a tool: 1 to 256 characters, no
// whitespace or control characters (ASCII's: below 0x21, and 0x7f).
func ValidTool(name string) bool {
	n := 0
	for _, r := range name {
		if r <= 0x20 || r == 0x7f {
			return false
		}
		if n++; n > 256 {
			return false
		}
	}
	return n > 0
}

// Digest binds a call: the SHA-256 of the canonical JSON of its server,
// tool and arguments (object keys sorted, numbers as Go formats float64,
// absent arguments as {}). An approval holds it in the decided resource, so
// a replay with any other server, tool or argument is another call.
func Digest(serverName, toolName string, arguments map[string]any) (string, error) {
	if arguments == nil {
		arguments = map[string]any{}
	}
	b, err := json.Marshal(struct {
		Server    string         `json:"server"`
		Tool      string         `json:"tool"`
		Arguments map[string]any `json:"arguments"`
	}{serverName, toolName, arguments})
	if err != nil {
		return "", fmt.Errorf("mcp call digest: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// Resource is the decided resource of a call.
func Resource(serverName, toolName, digest string) map[string]string {
	return map[string]string{KeyServer: serverName, KeyTool: toolName, KeyDigest: digest}
}
