package delivery

import (
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/clawguard/clawguard/proto/mcpcall"
	"github.com/clawguard/clawguard/proto/pkgname"
)

// The payload schemas of the actions the server applies. Each bound here
// is the server's, or stricter: a payload the runner lets through to a
// hold must not be refused at apply, after a human approved it.

// MaxPackages is the most packages one install_packages request may name
// (apt and npm together; the server's bound).
const MaxPackages = 20

// InstallPackagesSchema: {apt?: [...], npm?: [...], reason?}, 1 to
// MaxPackages names in all, each as pkgname allows.
func InstallPackagesSchema() *jsonschema.Schema {
	nonEmpty := func(key string) *jsonschema.Schema {
		return &jsonschema.Schema{Required: []string{key},
			Properties: map[string]*jsonschema.Schema{key: {Type: "array", MinItems: Ptr(1)}}}
	}
	s := &jsonschema.Schema{
		Type:        "object",
		Description: fmt.Sprintf("1 to %d packages in all, apt and npm together", MaxPackages),
		Properties: map[string]*jsonschema.Schema{
			"apt": StringListSchema("Debian packages to install, e.g. [\"cowsay\"]",
				&jsonschema.Schema{Type: "string", Pattern: pkgname.AptPattern}, MaxPackages),
			"npm": StringListSchema("npm packages to install globally, e.g. [\"left-pad\", \"@scope/pkg\"]",
				&jsonschema.Schema{Type: "string", Pattern: pkgname.NpmPattern}, MaxPackages),
			"reason": StringSchema("Why you need them: the approver reads it"),
		},
		PropertyOrder: []string{"apt", "npm", "reason"},
		AnyOf:         []*jsonschema.Schema{nonEmpty("apt"), nonEmpty("npm")},
	}
	// apt and npm together: with at least k apt names, at most MaxPackages-k
	// npm names (JSON Schema has no sum of two lengths).
	for k := 1; k <= MaxPackages; k++ {
		s.AllOf = append(s.AllOf, &jsonschema.Schema{
			If: &jsonschema.Schema{Required: []string{"apt"},
				Properties: map[string]*jsonschema.Schema{"apt": {Type: "array", MinItems: Ptr(k)}}},
			Then: &jsonschema.Schema{Properties: map[string]*jsonschema.Schema{"npm": {MaxItems: Ptr(MaxPackages - k)}}},
		})
	}
	return s
}

// AddMCPServerSchema: {name, command, args?, env?, image?}.
func AddMCPServerSchema() *jsonschema.Schema {
	return &jsonschema.Schema{
		Type:     "object",
		Required: []string{"name", "command"},
		Properties: map[string]*jsonschema.Schema{
			"name":    {Type: "string", Pattern: mcpcall.ServerPattern, Description: "The server's name (letters, digits, . _ -), e.g. \"fs\""},
			"command": {Type: "string", MinLength: Ptr(1), Description: "The command that starts it (stdio), e.g. \"mcp-server-filesystem\""},
			"args":    StringListSchema("Its arguments", &jsonschema.Schema{Type: "string"}, 0),
			"env": {Type: "object", Description: "Environment variables for it (the approver sees them)",
				AdditionalProperties: &jsonschema.Schema{Type: "string"}},
			"image": {Type: "string", Description: "The image its own container runs (docker runtime; default: the group's base image)"},
		},
		PropertyOrder: []string{"name", "command", "args", "env", "image"},
	}
}

// MaxInstructions bounds create_agent's instructions, in characters: 4096
// characters are at most 16 KiB in UTF-8, the server's bound in bytes
// (JSON Schema counts characters).
const MaxInstructions = 4096

// CreateAgentSchema: {name, instructions?}.
func CreateAgentSchema() *jsonschema.Schema {
	return &jsonschema.Schema{
		Type:     "object",
		Required: []string{"name"},
		Properties: map[string]*jsonschema.Schema{
			"name": {Type: "string", Pattern: NonBlank, Description: "The new agent's name (not blank)"},
			"instructions": {Type: "string", MaxLength: Ptr(MaxInstructions),
				Description: fmt.Sprintf("What the new agent is for: it starts with these (at most %d characters)", MaxInstructions)},
		},
		PropertyOrder: []string{"name", "instructions"},
	}
}

// MaxMessageText bounds an agent-to-agent message's text, in characters
// (at most 64 KiB in UTF-8).
const MaxMessageText = 16 << 10

// SendMessageSchema: {to, text?, payload?}, text or payload required. Other
// keys are delivered with the message too (the approver is shown them).
func SendMessageSchema() *jsonschema.Schema {
	return &jsonschema.Schema{
		Type:     "object",
		Required: []string{"to"},
		Properties: map[string]*jsonschema.Schema{
			"to": {Type: "string", MinLength: Ptr(1), Description: "The target agent group's id"},
			"text": {Type: "string", MaxLength: Ptr(MaxMessageText),
				Description: fmt.Sprintf("The message (at most %d characters)", MaxMessageText)},
			"payload": {Description: "Structured data delivered with the message"},
		},
		PropertyOrder: []string{"to", "text", "payload"},
		AnyOf: []*jsonschema.Schema{
			{Required: []string{"text"}, Properties: map[string]*jsonschema.Schema{"text": {MinLength: Ptr(1)}}},
			{Required: []string{"payload"}},
		},
		Description: "text or payload is required",
	}
}
