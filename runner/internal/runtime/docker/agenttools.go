package docker

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	rt "github.com/clawguard/clawguard/runner/internal/runtime"
)

// Where the runner's own programs live in every agent image it builds.
const (
	// InitBinaryPath is clawguard-init, the container's first process: it
	// opens the agent's way out on loopback, then runs the agent.
	InitBinaryPath = "/usr/local/bin/clawguard-init"
	// CABundlePath is the CA roots the agent trusts (the runner's
	// --agent-ca-file), named by SSL_CERT_FILE and its cousins.
	CABundlePath = "/etc/clawguard/ca-certificates.crt"
	// LabelToolsHash records which build of the runner's programs and CA
	// roots a group image carries, so a runner upgrade rebuilds it.
	LabelToolsHash = "dev.clawguard.tools-sha256"
)

// AgentTools are the runner's files every group image gets, whatever the
// group's base image: clawguard-init (the container's entrypoint, the
// agent's command after it), clawguard-mcp, and CA roots. Paths on the
// runner's host; Init and MCP must be static binaries.
type AgentTools struct {
	Init, MCP string
	CABundle  string // "" = the image's own roots
}

// toolLayer is AgentTools read once: the files a build copies in.
type toolLayer struct {
	files map[string]tarFile // build-context name (toolsTree + the path in the image) → file
	hash  string
	ca    bool
}

// toolsTree is the build context's directory that mirrors the image's root
// for the tools: one COPY of it is one layer. (A COPY per file made a layer
// per file, and Docker's classic builder on fuse-overlayfs failed the image
// — "layer does not exist" — when one of them copied clawguard-mcp where
// the base image already had the same file.)
const toolsTree = "tools"

// loadTools reads and checks the tools; nil when none are configured (a
// runtime for tests of other things: its images carry the base's own
// entrypoint and no way out).
func loadTools(t AgentTools) (*toolLayer, error) {
	if t.Init == "" && t.MCP == "" && t.CABundle == "" {
		return nil, nil
	}
	if t.Init == "" || t.MCP == "" {
		return nil, fmt.Errorf("agent tools: both clawguard-init and clawguard-mcp are needed (init %q, mcp %q)", t.Init, t.MCP)
	}
	l := &toolLayer{files: map[string]tarFile{}}
	sum := sha256.New()
	add := func(src, dst string, static bool) error {
		data, err := os.ReadFile(src)
		if err != nil {
			return fmt.Errorf("agent tools: %w", err)
		}
		if static {
			if err := checkStatic(data); err != nil {
				return fmt.Errorf("agent tools: %s: %w", src, err)
			}
		}
		mode := int64(0o755)
		if !static {
			mode = 0o644
		}
		// Each file at its path under the context's tools/ tree, so one
		// COPY lays them all down in one layer (see addTo).
		l.files[toolsTree+dst] = tarFile{data: data, mode: mode}
		fmt.Fprintf(sum, "%s %d\n", dst, len(data))
		sum.Write(data)
		return nil
	}
	if err := add(t.Init, InitBinaryPath, true); err != nil {
		return nil, err
	}
	if err := add(t.MCP, MCPBinaryPath, true); err != nil {
		return nil, err
	}
	if t.CABundle != "" {
		if err := add(t.CABundle, CABundlePath, false); err != nil {
			return nil, err
		}
		if !strings.Contains(string(l.files[toolsTree+CABundlePath].data), "-----BEGIN CERTIFICATE-----") {
			return nil, fmt.Errorf("agent tools: %s holds no PEM certificate", t.CABundle)
		}
		l.ca = true
	}
	l.hash = hex.EncodeToString(sum.Sum(nil))
	return l, nil
}

// addTo adds the tools to a group image's Dockerfile and build context:
// copied in, and clawguard-init in front of the base's entrypoint.
func (l *toolLayer) addTo(dockerfile string, entrypoint, cmd []string, files map[string]tarFile) (string, error) {
	for name, f := range l.files {
		files[name] = f
	}
	dockerfile += "COPY " + toolsTree + "/ /\n"
	lines, err := entrypointLines(entrypoint, cmd)
	if err != nil {
		return "", err
	}
	return dockerfile + lines, nil
}

// CAEnv is what points the usual clients at the CA roots an image carries
// (Go and OpenSSL, curl, Node, Python requests, git, pip).
func CAEnv() map[string]string {
	return map[string]string{
		"SSL_CERT_FILE": CABundlePath, "CURL_CA_BUNDLE": CABundlePath, "NODE_EXTRA_CA_CERTS": CABundlePath,
		"REQUESTS_CA_BUNDLE": CABundlePath, "GIT_SSL_CAINFO": CABundlePath, "PIP_CERT": CABundlePath,
	}
}

// entrypointLines make clawguard-init the image's entrypoint, the base's
// entrypoint after it, and keep the base's command (an ENTRYPOINT line
// resets an inherited CMD, so it is written again).
func entrypointLines(entrypoint, cmd []string) (string, error) {
	ep, err := json.Marshal(append([]string{InitBinaryPath, "--"}, entrypoint...))
	if err != nil {
		return "", err
	}
	lines := "ENTRYPOINT " + string(ep) + "\n"
	if len(cmd) > 0 {
		c, err := json.Marshal(cmd)
		if err != nil {
			return "", err
		}
		lines += "CMD " + string(c) + "\n"
	}
	return lines, nil
}

// AgentHome is the agent's HOME in its container: a writable tmpfs of
// Config.HomeSize, the agent's own (agents rewrite files there at start,
// on a read-only root).
const AgentHome = "/home/agent"

// agentEnv is what every container gets besides the spec's: its HOME and,
// when the image carries CA roots, the variables that name them.
func (r *Runtime) agentEnv() []string {
	env := []string{"HOME=" + AgentHome}
	if r.tools != nil && r.tools.ca {
		ca := CAEnv()
		keys := make([]string, 0, len(ca))
		for k := range ca {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			env = append(env, k+"="+ca[k])
		}
	}
	return env
}

// homeTmpfs is the options of the HOME tmpfs, owned by the agents' user.
func (r *Runtime) homeTmpfs() (string, error) {
	size, err := rt.ParseMemory(r.cfg.HomeSize)
	if err != nil || size <= 0 {
		return "", fmt.Errorf("home size %q: want a size such as 256m", r.cfg.HomeSize)
	}
	uid, gid, err := parseUser(r.cfg.User)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("rw,nosuid,nodev,size=%d,uid=%d,gid=%d,mode=0700", size, uid, gid), nil
}

// command is the container's entrypoint and command: the image's, with the
// spec's arguments after it; or the group's agent command in its place
// (after clawguard-init when the image carries it).
func (r *Runtime) command(spec rt.SessionSpec) (entrypoint, cmd []string) {
	if len(spec.AgentCommand) == 0 {
		return nil, spec.Command
	}
	cmd = append(append([]string(nil), spec.AgentCommand...), spec.Command...)
	if r.tools != nil {
		return []string{InitBinaryPath, "--"}, cmd
	}
	return cmd[:1], cmd[1:]
}
