package selfmod

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/clawguard/clawguard/server/internal/fault"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/pkgname"
	"github.com/clawguard/clawguard/server/internal/pushes"
	"github.com/clawguard/clawguard/server/internal/registry"
	"github.com/clawguard/clawguard/server/internal/resources"
)

// Appliers are the domain's apply steps, handed to the registry at assembly:
// an approved install or MCP server changes the group's container config
// and rebuilds its image. Both are always held (AlwaysHeld): a grantless
// ALLOW can only be a relaxed mode's.
func Appliers() []registry.Applier {
	return []registry.Applier{
		{Action: InstallAction, Apply: applyInstall, AlwaysHeld: true},
		{Action: MCPAction, Apply: applyMCP, AlwaysHeld: true},
	}
}

func applyInstall(ctx context.Context, tx pgx.Tx, sess registry.Session, req *guardv1.ApplyActionRequest) (registry.Applied, error) {
	addApt, err := registry.PayloadStrings(req, "apt")
	if err != nil {
		return registry.Applied{}, err
	}
	addNpm, err := registry.PayloadStrings(req, "npm")
	if err != nil {
		return registry.Applied{}, err
	}
	if n := len(addApt) + len(addNpm); n < 1 || n > MaxPackages {
		return registry.Applied{}, fault.New(fault.Invalid, "payload: 1 to %d packages (apt, npm), got %d", MaxPackages, n)
	}
	for _, p := range addApt {
		if !pkgname.Apt(p) {
			return registry.Applied{}, fault.New(fault.Invalid, "payload.apt: invalid package name %q", p)
		}
	}
	for _, p := range addNpm {
		if !pkgname.Npm(p) {
			return registry.Applied{}, fault.New(fault.Invalid, "payload.npm: invalid package name %q", p)
		}
	}
	c, err := resources.LockConfigTx(ctx, tx, sess.GroupID)
	if err != nil {
		return registry.Applied{}, err
	}
	apt, npm := union(c.Apt, addApt), union(c.Npm, addNpm)
	version, err := resources.SetPackagesTx(ctx, tx, sess.GroupID, apt, npm)
	if err != nil {
		return registry.Applied{}, err
	}
	added := append(prefixed("apt: ", addApt), prefixed("npm: ", addNpm)...)
	pushIDs, err := pushes.RestartGroupTx(ctx, tx, sess.GroupID, "packages installed: "+strings.Join(added, ", "), true, version)
	if err != nil {
		return registry.Applied{}, err
	}
	return registry.Applied{
		Result:  map[string]any{"config_version": version, "apt": toAny(apt), "npm": toAny(npm), "restart_pushes": toAny(pushIDs)},
		Message: fmt.Sprintf("Packages added (%s); the image is rebuilt and the container restarts.", strings.Join(added, ", ")),
	}, nil
}

func applyMCP(ctx context.Context, tx pgx.Tx, sess registry.Session, req *guardv1.ApplyActionRequest) (registry.Applied, error) {
	name, command := registry.PayloadString(req, "name"), registry.PayloadString(req, "command")
	if name == "" {
		return registry.Applied{}, fault.New(fault.Invalid, "payload.name: required")
	}
	if command == "" {
		return registry.Applied{}, fault.New(fault.Invalid, "payload.command: required")
	}
	args, err := registry.PayloadStrings(req, "args")
	if err != nil {
		return registry.Applied{}, err
	}
	env := map[string]string{}
	for k, v := range req.GetPayload().GetFields()["env"].GetStructValue().GetFields() {
		sv, ok := v.GetKind().(*structpb.Value_StringValue)
		if !ok {
			return registry.Applied{}, fault.New(fault.Invalid, "payload.env.%s: must be a string", k)
		}
		env[k] = sv.StringValue
	}
	c, err := resources.LockConfigTx(ctx, tx, sess.GroupID)
	if err != nil {
		return registry.Applied{}, err
	}
	// An approved server replaces its namesake.
	mcp := c.MCP
	entry := resources.MCPServer{Name: name, Command: command, Args: args, Env: env, Image: registry.PayloadString(req, "image")}
	replaced := false
	for i, m := range mcp {
		if m.Name == name {
			mcp[i], replaced = entry, true
		}
	}
	if !replaced {
		mcp = append(mcp, entry)
	}
	raw, err := json.Marshal(mcp)
	if err != nil {
		return registry.Applied{}, fmt.Errorf("encode mcp_servers: %w", err)
	}
	version, err := resources.SetMCPServersTx(ctx, tx, sess.GroupID, raw)
	if err != nil {
		return registry.Applied{}, err
	}
	// Every session's runner re-reads the config on the restart and hosts
	// the new server (outside the agent's container). Queued as a rebuild,
	// a runner already running this config version (the requesting
	// session, restarted by the replay itself) skips it instead of
	// restarting its agent a second time.
	pushIDs, err := pushes.RestartGroupTx(ctx, tx, sess.GroupID, "MCP server added: "+name, true, version)
	if err != nil {
		return registry.Applied{}, err
	}
	return registry.Applied{
		Result:  map[string]any{"config_version": version, "mcp_server": name, "restart_pushes": toAny(pushIDs)},
		Message: fmt.Sprintf("MCP server %q added; the container restarts.", name),
	}, nil
}

func union(have, add []string) []string {
	out := append([]string{}, have...)
	for _, p := range add {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

func prefixed(prefix string, xs []string) []string {
	out := make([]string, 0, len(xs))
	for _, x := range xs {
		out = append(out, prefix+x)
	}
	return out
}

func toAny(xs []string) []any {
	out := make([]any, 0, len(xs))
	for _, x := range xs {
		out = append(out, x)
	}
	return out
}
