package mcpface

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
)

// Tool names: MCP allows [A-Za-z0-9_.-]{1,128}, but hosts are stricter
// (Claude's API takes [A-Za-z0-9_-]{1,64}), so every name offered fits the
// stricter rule.
const maxToolName = 64

var toolNameRule = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

var notToolNameChar = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// guardedToolName names a guarded MCP server's tool: <server>__<tool>, each
// part with anything outside the rule turned into "_". A delivery action's
// name never holds "__", so the two cannot meet; two guarded tools can (a.b
// and a_b), and then neither is offered (see offer). A name past the length
// bound keeps its start and a digest of the whole.
func guardedToolName(server, tool string) string {
	name := notToolNameChar.ReplaceAllString(server, "_") + "__" + notToolNameChar.ReplaceAllString(tool, "_")
	if len(name) > maxToolName {
		sum := sha256.Sum256([]byte(server + "\x00" + tool))
		name = name[:maxToolName-9] + "_" + hex.EncodeToString(sum[:4])
	}
	return name
}

// candidate is one tool clawguard-mcp would offer.
type candidate struct {
	name   string
	origin string // what it comes from, for a refusal's message
}

// offer keeps the candidates whose names are valid and unique; the others
// are refused, each with the reason the model (and the operator, on
// stderr) is told. Names in reserved are clawguard-mcp's own.
func offer(cands []candidate, reserved map[string]bool) (ok map[string]bool, refused []string) {
	byName := map[string][]candidate{}
	for _, c := range cands {
		byName[c.name] = append(byName[c.name], c)
	}
	ok = map[string]bool{}
	for name, cs := range byName {
		switch {
		case !toolNameRule.MatchString(name):
			for _, c := range cs {
				refused = append(refused, c.origin+" is not offered: "+quote(name)+" is not a valid tool name")
			}
		case reserved[name]:
			for _, c := range cs {
				refused = append(refused, c.origin+" is not offered: its name "+quote(name)+" is clawguard-mcp's own tool")
			}
		case len(cs) > 1:
			origins := make([]string, len(cs))
			for i, c := range cs {
				origins[i] = c.origin
			}
			refused = append(refused, strings.Join(origins, " and ")+" are not offered: their names collide as "+quote(name))
		default:
			ok[name] = true
		}
	}
	return ok, refused
}

func quote(s string) string { return `"` + s + `"` }
