// Package selfmod registers the self-modification catalog entries: from the
// container path, installing packages and adding an MCP server always hold
// for the group's admins (the seed's self-mod/guard.ts), after the seed's
// prechecks (package names, 1..20 packages; an MCP server needs a name and
// a command) refuse malformed requests without ever creating a hold.
package selfmod

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/mcpcall"
	"github.com/clawguard/clawguard/proto/pkgname"
	"github.com/clawguard/clawguard/proto/secret"
	"github.com/clawguard/clawguard/server/internal/commands"
	"github.com/clawguard/clawguard/server/internal/guard"
)

// Catalog actions and the hold kinds of their grants.
const (
	InstallAction         = "self_mod.install_packages"
	InstallApprovalAction = "install_packages"
	MCPAction             = "self_mod.add_mcp_server"
	MCPApprovalAction     = "add_mcp_server"
	MaxPackages           = 20
)

var groupExists = commands.GroupExistsFact

// Entries are the two self-mod entries.
func Entries() []guard.Entry {
	return []guard.Entry{
		{
			Action: InstallAction, ApprovalAction: InstallApprovalAction,
			Description: "an agent installs apt/npm packages into its image",
			Facts:       []guard.Fact{groupExists},
			Precheck:    checkInstall,
			Baseline:    baseline("install_packages"),
			Explain:     explain,
			// Bind the grant to the approved package lists.
			GrantMatches: func(g *guard.GrantRow, in *guard.Input) bool {
				return sameList(g.Payload["apt"], in.Payload["apt"]) && sameList(g.Payload["npm"], in.Payload["npm"])
			},
		},
		{
			Action: MCPAction, ApprovalAction: MCPApprovalAction,
			Description: "an agent adds an MCP server to its container",
			Facts:       []guard.Fact{groupExists},
			Precheck:    checkMCP,
			Baseline:    baseline("add_mcp_server"),
			Explain:     explain,
			// Bind the grant to the approved server, env included: the env is
			// stored and applied with it (NODE_OPTIONS alone runs code).
			GrantMatches: func(g *guard.GrantRow, in *guard.Input) bool {
				return g.Payload["name"] == in.Payload["name"] && g.Payload["command"] == in.Payload["command"] &&
					sameList(g.Payload["args"], in.Payload["args"]) && sameEnv(g.Payload["env"], in.Payload["env"]) &&
					sameString(g.Payload["image"], in.Payload["image"])
			},
		},
	}
}

// Register adds both entries.
func Register(cat *guard.Catalog) error {
	for _, e := range Entries() {
		if err := cat.Register(e); err != nil {
			return err
		}
	}
	return nil
}

func baseline(label string) func(in *guard.Input, f guard.Facts) (guard.Decision, error) {
	return func(in *guard.Input, _ guard.Facts) (guard.Decision, error) {
		group, ok := in.AgentGroup()
		if !ok {
			return guard.Denyf("%s is a container-originated action.", label), nil
		}
		return guard.Hold(guard.AdminsOfScope(group, ""), guardv1.ApproverScope_APPROVER_SCOPE_GROUP,
			label+" always requires admin approval from the container path"), nil
	}
}

func checkInstall(in *guard.Input, f guard.Facts) error {
	if _, ok := in.AgentGroup(); ok && !f.Bool("group_exists") {
		return errors.New("install_packages failed: agent group not found.")
	}
	apt, okA := stringList(in.Payload["apt"])
	npm, okN := stringList(in.Payload["npm"])
	if !okA || !okN {
		return errors.New("install_packages failed: apt and npm must be lists of package names.")
	}
	if len(apt)+len(npm) == 0 {
		return errors.New("install_packages failed: at least one apt or npm package is required.")
	}
	if len(apt)+len(npm) > MaxPackages {
		return fmt.Errorf("install_packages failed: max %d packages per request.", MaxPackages)
	}
	for _, p := range apt {
		if !pkgname.Apt(p) {
			return fmt.Errorf("install_packages failed: invalid apt package name %q.", p)
		}
	}
	for _, p := range npm {
		if !pkgname.Npm(p) {
			return fmt.Errorf("install_packages failed: invalid npm package name %q.", p)
		}
	}
	return nil
}

func checkMCP(in *guard.Input, f guard.Facts) error {
	if _, ok := in.AgentGroup(); ok && !f.Bool("group_exists") {
		return errors.New("add_mcp_server failed: agent group not found.")
	}
	if in.Arg("name") == "" || in.Arg("command") == "" {
		return errors.New("add_mcp_server failed: name and command are required.")
	}
	// The name names the server's container, data directory and every
	// mcp.call decision about it.
	if !mcpcall.ValidServer(in.Arg("name")) {
		return fmt.Errorf("add_mcp_server failed: %q is not a valid MCP server name (letters, digits, . _ -).", in.Arg("name"))
	}
	if img, isStr := in.Payload["image"].(string); in.Payload["image"] != nil && (!isStr || !imageRef.MatchString(img)) {
		return errors.New("add_mcp_server failed: image must be an image reference.")
	}
	// The marker every read shows in place of a value is not a value: an
	// agent cannot keep a secret it cannot read.
	if e, _ := in.Payload["env"].(map[string]any); e != nil {
		for k, v := range e {
			if v == secret.Redacted {
				return fmt.Errorf("add_mcp_server failed: env %s: %q is not a value (secrets are write-only: set the value).", k, secret.Redacted)
			}
		}
	}
	return nil
}

// imageRef is the admin RPCs' image reference rule (resources).
var imageRef = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,254}$`)

// sameString compares two optional strings (absent = "").
func sameString(a, b any) bool {
	sa, okA := a.(string)
	sb, okB := b.(string)
	return (okA || a == nil) && (okB || b == nil) && sa == sb
}

// stringList reads an optional list of strings (absent = empty).
func stringList(v any) ([]string, bool) {
	if v == nil {
		return nil, true
	}
	list, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, ok := x.(string)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

func sameList(a, b any) bool {
	la, okA := stringList(a)
	lb, okB := stringList(b)
	if !okA || !okB {
		return false
	}
	if len(la) == 0 && len(lb) == 0 {
		return true
	}
	return reflect.DeepEqual(la, lb)
}

// sameEnv compares two optional env objects (absent = empty).
func sameEnv(a, b any) bool {
	ma, okA := env(a)
	mb, okB := env(b)
	return okA && okB && reflect.DeepEqual(ma, mb)
}

func env(v any) (map[string]any, bool) {
	if v == nil {
		return map[string]any{}, true
	}
	m, ok := v.(map[string]any)
	return m, ok
}
