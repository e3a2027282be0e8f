// Package runtime defines how the runner runs one agent session: the
// contract between the runner (gateway, delivery, connect) and the thing that
// actually executes agents.
//
// Two implementations exist:
//
//   - runtime/docker: one locked-down container per session (cap-drop ALL,
//     no-new-privileges, pids limit, read-only root, no network, non-root
//     user), the session directory mounted at /workspace and each of the
//     session's endpoints (the agent gateway's socket at
//     /run/clawguard/gateway.sock first). One image per agent group, rebuilt
//     when the group's packages change.
//   - runtime/process: the agent binary as a plain child process. NO
//     isolation; for laptops without Docker and for tests.
//
// Lifecycle as the runner uses it:
//
//	rt.RemoveOrphans(ctx)               // once, before anything else
//	rt.Start(ctx, spec)                 // on first message / on a push to a stopped session
//	rt.StopIdle(ctx, idle, lastActive)  // periodically
//	img, _ := rt.BuildGroupImage(ctx, g) // after an approved install_packages
//	spec.Image = img; rt.Restart(ctx, spec)
//
// The install (runner id) is fixed when a runtime is constructed; every
// container it creates carries that install's label, which is what
// RemoveOrphans and Running select on.
package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// WriteInstructions puts a group's instructions at InstructionsFile in a
// session directory (atomically), so a session starts with what the group's
// record says. Empty text writes nothing: a group has no way to lose its
// instructions, and a config read that failed must not erase them.
func WriteInstructions(sessionDir, text string) error {
	if text == "" {
		return nil
	}
	path := filepath.Join(sessionDir, InstructionsFile)
	// Readable by the agent's non-root user; only the runner writes it.
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("instructions: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		return fmt.Errorf("instructions: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("instructions: %w", err)
	}
	return nil
}

// Paths and variables every agent can rely on, whatever the runtime.
const (
	// ContainerWorkspace is where the session directory appears in a container.
	ContainerWorkspace = "/workspace"
	// ContainerGatewaySocket is where the gateway socket appears in a container.
	ContainerGatewaySocket = "/run/clawguard/gateway.sock"

	// ContainerEgressSocket is where the egress socket appears in a
	// container; EnvEgressSocket and EnvEgressListen tell clawguard-init
	// where it is and where to listen for the agent.
	ContainerEgressSocket = "/run/clawguard/egress.sock"
	EnvEgressSocket       = "CLAWGUARD_EGRESS_SOCKET"
	EnvEgressListen       = "CLAWGUARD_EGRESS_LISTEN"

	// EnvGatewaySocket names the agent gateway's unix socket path.
	EnvGatewaySocket = "CLAWGUARD_GATEWAY_SOCKET"
	// EnvWorkspace names the agent's working directory.
	EnvWorkspace = "CLAWGUARD_WORKSPACE"
	// EnvSessionID and EnvGroupID tell the agent who it is.
	EnvSessionID = "CLAWGUARD_SESSION_ID"
	EnvGroupID   = "CLAWGUARD_GROUP_ID"

	// InstructionsFile is where, relative to the workspace, the agent finds
	// its group's instructions (create_agent's); absent when it has none.
	// The runner rewrites it from the group's record at every start.
	InstructionsFile = ".clawguard/instructions.md"
)

// Labels put on every container and group image.
const (
	LabelInstall       = "dev.clawguard.install"
	LabelSession       = "dev.clawguard.session"
	LabelGroup         = "dev.clawguard.group"
	LabelConfigVersion = "dev.clawguard.config-version"
	LabelPackagesHash  = "dev.clawguard.packages-sha256"
)

// DefaultPidsLimit applies when SessionSpec.PidsLimit is zero.
const DefaultPidsLimit int64 = 256

// SessionSpec is everything needed to run one session's agent.
type SessionSpec struct {
	SessionID    string
	AgentGroupID string
	Image        string   // docker: image ref of the group; process: path of the agent binary
	Command      []string // arguments (docker: appended to the image's entrypoint)
	// AgentCommand, when set, replaces the image's command (docker: after
	// clawguard-init) or the agent binary (process): the group's own.
	AgentCommand []string
	Env          map[string]string // extra environment; the CLAWGUARD_* variables above are always set
	SessionDir   string            // host directory; the agent's /workspace (docker) or working dir (process)
	// Endpoints are what the session gives its agent, each a unix socket
	// the runner serves (the gateway first): the only ways out of a
	// container, which has no network. Each must exist before Start.
	Endpoints []Endpoint
	CPUs      string // "" → no CPU limit at all; e.g. "0.5", "2"
	Memory    string // "" → no memory limit at all; e.g. "256m", "1g"
	PidsLimit int64  // 0 → DefaultPidsLimit
}

// Endpoint is a unix socket the runner serves for one session and gives its
// agent: the docker runtime mounts HostSocket at ContainerSocket and sets
// ContainerEnv; the process runtime leaves the socket where it is and sets
// HostEnv. The sessions package declares the list (sessions/endpoints.go).
type Endpoint struct {
	Name            string // "gateway", …: a valid id
	HostSocket      string // the runner's side: an absolute path
	ContainerSocket string // where a container sees it: an absolute path
	// ContainerEnv and HostEnv are the variables that tell the agent where
	// it is, as a container sees it and as a host process does.
	ContainerEnv, HostEnv map[string]string
}

// GroupImageSpec describes the image of one agent group at one config version.
type GroupImageSpec struct {
	GroupID       string
	ConfigVersion int64
	BaseImage     string // the group's base (docker: image ref; process: agent binary path)
	AptPackages   []string
	NpmPackages   []string
	// Output receives the build's output when an image is built (nil:
	// discarded), for the approver and the agent.
	Output io.Writer
}

// Handle identifies a started session.
type Handle struct {
	SessionID string
	ID        string // container id (docker) or pid (process)
	Reused    bool   // true when Start found the session already running
}

// Runtime runs agent sessions. Implementations are safe for concurrent use;
// operations on the same session are serialised.
type Runtime interface {
	// Name is "docker" or "process".
	Name() string
	// Start runs the session, or returns the already running one (Reused).
	Start(ctx context.Context, spec SessionSpec) (Handle, error)
	// Stop stops the session's agent (SIGTERM, then SIGKILL after a grace
	// period, or by ctx's deadline when that is sooner) and forgets it.
	// Stopping an unknown session is not an error.
	Stop(ctx context.Context, sessionID string) error
	// Restart stops and starts the session, picking up a new image or config.
	Restart(ctx context.Context, spec SessionSpec) (Handle, error)
	// Running lists the ids of sessions whose agent is running.
	Running(ctx context.Context) ([]string, error)
	// RemoveOrphans removes everything left behind by an earlier run of this
	// install. Call once at start, before any Start.
	RemoveOrphans(ctx context.Context) (int, error)
	// StopIdle stops sessions with no activity for idleFor. lastActive may
	// return the zero time; the agent's start time is used as a floor.
	StopIdle(ctx context.Context, idleFor time.Duration, lastActive func(sessionID string) time.Time) (int, error)
	// BuildGroupImage makes the image for the group's config and returns the
	// value to put in SessionSpec.Image. Building an existing identical image
	// is a no-op.
	BuildGroupImage(ctx context.Context, spec GroupImageSpec) (string, error)
}

// ErrInvalidSpec marks a spec refused before anything was started.
var ErrInvalidSpec = errors.New("invalid session spec")

// idPattern is what ids must look like to be safe in container names,
// labels, image tags and file names.
var idPattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$`)

// ValidID reports whether id can name an install, session or group.
func ValidID(id string) bool { return idPattern.MatchString(id) }

// Validate checks a spec at the edge: ids, paths and limits. It does not
// touch the file system.
func (s SessionSpec) Validate() error {
	if !ValidID(s.SessionID) {
		return fmt.Errorf("%w: session id %q", ErrInvalidSpec, s.SessionID)
	}
	if !ValidID(s.AgentGroupID) {
		return fmt.Errorf("%w: agent group id %q", ErrInvalidSpec, s.AgentGroupID)
	}
	if s.Image == "" {
		return fmt.Errorf("%w: image is empty", ErrInvalidSpec)
	}
	if !filepath.IsAbs(s.SessionDir) {
		return fmt.Errorf("%w: session dir %q is not absolute", ErrInvalidSpec, s.SessionDir)
	}
	if len(s.Endpoints) == 0 {
		return fmt.Errorf("%w: no endpoint: the agent would have no way to the runner", ErrInvalidSpec)
	}
	for _, e := range s.Endpoints {
		if !ValidID(e.Name) || !filepath.IsAbs(e.HostSocket) || !filepath.IsAbs(e.ContainerSocket) {
			return fmt.Errorf("%w: endpoint %q: a valid name and absolute socket paths are required (%q, %q)",
				ErrInvalidSpec, e.Name, e.HostSocket, e.ContainerSocket)
		}
	}
	if s.PidsLimit < 0 {
		return fmt.Errorf("%w: pids limit %d", ErrInvalidSpec, s.PidsLimit)
	}
	if _, err := ParseCPUs(s.CPUs); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidSpec, err)
	}
	if _, err := ParseMemory(s.Memory); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidSpec, err)
	}
	return nil
}

// EffectivePidsLimit is the pids limit to apply.
func (s SessionSpec) EffectivePidsLimit() int64 {
	if s.PidsLimit == 0 {
		return DefaultPidsLimit
	}
	return s.PidsLimit
}

// CheckEndpoints fails unless every endpoint's host socket is an existing
// unix socket, so an agent is never started without its ways out.
func CheckEndpoints(endpoints []Endpoint) error {
	for _, e := range endpoints {
		fi, err := os.Stat(e.HostSocket)
		if err != nil {
			return fmt.Errorf("%s socket: %w", e.Name, err)
		}
		if fi.Mode()&os.ModeSocket == 0 {
			return fmt.Errorf("%s socket %s is not a unix socket (mode %s)", e.Name, e.HostSocket, fi.Mode())
		}
	}
	return nil
}

// AgentEnv is an agent's whole environment: the spec's own variables, then
// what its endpoints say (host: as a host process sees them, else as a
// container does), then where its workspace is and who it is.
func AgentEnv(spec SessionSpec, workspace string, host bool) []string {
	env := make([]string, 0, len(spec.Env)+len(spec.Endpoints)+3)
	for k, v := range spec.Env {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	for _, e := range spec.Endpoints {
		vars := e.ContainerEnv
		if host {
			vars = e.HostEnv
		}
		keys := make([]string, 0, len(vars))
		for k := range vars {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			env = append(env, k+"="+vars[k])
		}
	}
	return append(env,
		EnvWorkspace+"="+workspace,
		EnvSessionID+"="+spec.SessionID,
		EnvGroupID+"="+spec.AgentGroupID,
	)
}

// IdleSince is when a session last did something: lastActive, or its start
// when it has not been active since.
func IdleSince(lastActive, started time.Time) time.Time {
	if lastActive.After(started) {
		return lastActive
	}
	return started
}

// MCPServerSpec is a guarded MCP server to run outside every agent's
// container (issue 31): the runner alone talks to it, over its stdin and
// stdout, and only it gets its environment (its credentials).
type MCPServerSpec struct {
	GroupID string
	Name    string // a valid id (mcpcall.ValidServer)
	Command string
	Args    []string
	Env     map[string]string
	// Image is the docker runtime's image for the server's container; the
	// process runtime runs Command on the host and ignores it.
	Image string
	// DataDir is a host directory of its own: its working directory (the
	// docker runtime mounts it at ContainerMCPData).
	DataDir string
	// Stderr receives its standard error (nil: discarded).
	Stderr io.Writer
}

// ContainerMCPData is where a guarded MCP server's data directory appears
// in its container.
const ContainerMCPData = "/data"

// LabelMCPServer marks a guarded MCP server's container with its server name.
const LabelMCPServer = "dev.clawguard.mcp-server"

// Validate checks an MCP server spec at the edge.
func (s MCPServerSpec) Validate() error {
	switch {
	case !ValidID(s.GroupID) || !ValidID(s.Name):
		return fmt.Errorf("%w: MCP server %q of group %q: invalid id", ErrInvalidSpec, s.Name, s.GroupID)
	case s.Command == "":
		return fmt.Errorf("%w: MCP server %q has no command", ErrInvalidSpec, s.Name)
	case !filepath.IsAbs(s.DataDir):
		return fmt.Errorf("%w: MCP server data dir %q is not absolute", ErrInvalidSpec, s.DataDir)
	}
	return nil
}

// MCPLauncher starts guarded MCP servers. The transport it returns starts
// the server when the MCP client connects and stops it when the client
// closes the connection.
type MCPLauncher interface {
	LaunchMCP(ctx context.Context, spec MCPServerSpec) (mcp.Transport, error)
}
