// Package config is the runner's one config struct: defaults, flags with
// CLAWGUARD_* env twins, and validation. Bad config is one clear line.
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/clawguard/clawguard/proto/agentenv"
	"github.com/clawguard/clawguard/proto/flagfile"
	"github.com/clawguard/clawguard/runner/internal/egress"
	"github.com/clawguard/clawguard/runner/internal/gateway"
	"github.com/clawguard/clawguard/runner/internal/modelgw"
	rt "github.com/clawguard/clawguard/runner/internal/runtime"
)

// Config is everything `clawguard-runner` can be told.
type Config struct {
	ConfigFile string // YAML settings file (proto/flagfile), below flags and the environment
	Server     string
	// ServerPick is how the first replica is chosen among --server's
	// addresses: random (spreads a fleet) or first (a preferred replica).
	ServerPick    string
	TokenFile     string
	ID            string
	Runtime       string // docker | process
	MetricsListen string
	// OTLPEndpoint exports traces over OTLP/gRPC ("" = the standard
	// OTEL_EXPORTER_OTLP_ENDPOINT, else off); see proto/telemetry.
	OTLPEndpoint  string
	DataDir       string
	AgentImage    string // docker: default agent image
	AgentBinary   string // process: the agent binary
	TLSCA         string // CA that signed the server's certificate: TLS on
	TLSCert       string // client certificate, for a server started with --tls-client-ca
	TLSKey        string
	TLSServerName string            // name to verify the server's certificate against (default: --server's host)
	Groups        []string          // groups whose sessions this runner opens at start
	AgentEnv      map[string]string // extra environment for every agent
	IdleAfter     time.Duration
	DecideWait    time.Duration
	// InboxAckDeadline is how long an agent may hold inbox items without
	// acknowledging any before it is restarted (its items are sent again).
	InboxAckDeadline time.Duration
	LogLevel         string
	Host             string
	// Host-wide container caps (the seed's CONTAINER_CPU_LIMIT and
	// CONTAINER_MEMORY_LIMIT) for groups that set none of their own; empty
	// adds no limit at all.
	ContainerCPUs   string
	ContainerMemory string
	// BuildNetwork is the Docker network of group image builds that install
	// packages (apt/npm fetch from their sources); "none" makes them fail.
	BuildNetwork string
	// MCPNetwork is the Docker network of guarded MCP servers' containers
	// ("none" by default; "bridge" for servers that call an API).
	MCPNetwork string
	// Gateway are the limits of every session's gateway (--gateway-rate,
	// --gateway-burst, --gateway-in-flight).
	Gateway gateway.Limits
	// Egress is an agent's way out; Tools what every agent image gets.
	Egress Egress
	Tools  AgentTools
	// Models is the model gateway on the egress socket.
	Models Models
}

// Default is the config before flags and env.
func Default() Config {
	return Config{
		Server:           "127.0.0.1:7443",
		ServerPick:       "random",
		Runtime:          "docker",
		DataDir:          ".data/runner",
		AgentImage:       "clawguard-agent-demo:latest",
		IdleAfter:        30 * time.Minute,
		DecideWait:       30 * time.Second,
		InboxAckDeadline: 5 * time.Minute,
		LogLevel:         "info",
		AgentEnv:         map[string]string{},
		BuildNetwork:     "default",
		MCPNetwork:       "none",
		Gateway:          gateway.DefaultLimits,
		Egress:           Egress{Limits: egress.DefaultLimits},
		Tools:            AgentTools{HomeSize: "256m"},
		Models:           Models{Limits: modelgw.DefaultLimits},
	}
}

// EnvName is the runner's own environment twin of a flag:
// CLAWGUARD_RUNNER_<FLAG>.
func EnvName(flagName string) string {
	return "CLAWGUARD_RUNNER_" + envSuffix(flagName)
}

// legacyEnvName is the name the runner read before it had its own prefix,
// shared with ncl and the server: still read where it means the same
// thing to all three.
func legacyEnvName(flagName string) string { return "CLAWGUARD_" + envSuffix(flagName) }

func envSuffix(flagName string) string {
	return strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// notTheRunners are the shared names that mean something else to another
// binary: CLAWGUARD_TOKEN_FILE is ncl's (an operator's token, exported by
// the README's terminal), CLAWGUARD_TLS_CERT and _KEY the server's own
// certificate. The runner never takes them: a runner given none of its own
// is refused, naming the variable it did not take.
var notTheRunners = map[string]string{
	"token-file": "ncl's (the operator's token)",
	"tls-cert":   "the server's own certificate (and ncl's client certificate)",
	"tls-key":    "the server's own key (and ncl's)",
}

// lookupEnv reads a flag's environment twin: the runner's own name, else
// the shared legacy one unless that means something else.
// The variable's name comes back too, for an error about its value.
func lookupEnv(flagName string) (value, name string, ok bool) {
	if v, ok := os.LookupEnv(EnvName(flagName)); ok {
		return v, EnvName(flagName), true
	}
	if _, other := notTheRunners[flagName]; other {
		return "", "", false
	}
	v, ok := os.LookupEnv(legacyEnvName(flagName))
	return v, legacyEnvName(flagName), ok
}

// Parse reads env twins, then flags (flags win). The error is one line.
func Parse(args []string) (Config, error) {
	c := Default()
	fs := flag.NewFlagSet("clawguard-runner", flag.ContinueOnError)
	p := &parser{fs: fs}
	if v, ok := os.LookupEnv(EnvName("config")); ok { // never ncl's CLAWGUARD_CONFIG
		c.ConfigFile = v
	}
	fs.StringVar(&c.ConfigFile, "config", c.ConfigFile, "YAML file of settings, keys named as these flags; flags, then the environment, win over it ["+EnvName("config")+"]")
	p.define(&c)
	fs.SetOutput(io.Discard) // a bad flag is one line, from the caller
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(os.Stderr)
			fs.PrintDefaults()
		}
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	fromEnv := func(name string) bool { _, _, ok := lookupEnv(name); return ok }
	if err := flagfile.Apply(fs, c.ConfigFile, fromEnv); err != nil {
		return c, err
	}
	if len(p.envErrs) > 0 {
		return c, errors.New(p.envErrs[0])
	}
	if err := notTaken(c); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// parser defines flags with their environment twins, read first (the flag
// then wins); a twin that does not parse is one line in envErrs.
type parser struct {
	fs      *flag.FlagSet
	envErrs []string
}

func (p *parser) str(v *string, name, usage string) {
	if e, _, ok := lookupEnv(name); ok {
		*v = e
	}
	p.fs.StringVar(v, name, *v, usage+" ["+EnvName(name)+"]")
}

func (p *parser) dur(v *time.Duration, name, usage string) {
	if e, from, ok := lookupEnv(name); ok {
		d, err := time.ParseDuration(e)
		if err != nil {
			p.envErrs = append(p.envErrs, fmt.Sprintf("%s=%q: not a duration", from, e))
		}
		*v = d
	}
	p.fs.DurationVar(v, name, *v, usage+" ["+EnvName(name)+"]")
}

func (p *parser) float(v *float64, name, usage string) {
	if e, from, ok := lookupEnv(name); ok {
		f, err := strconv.ParseFloat(e, 64)
		if err != nil {
			p.envErrs = append(p.envErrs, fmt.Sprintf("%s=%q: not a number", from, e))
		}
		*v = f
	}
	p.fs.Float64Var(v, name, *v, usage+" ["+EnvName(name)+"]")
}

func (p *parser) int(v *int, name, usage string) {
	if e, from, ok := lookupEnv(name); ok {
		n, err := strconv.Atoi(e)
		if err != nil {
			p.envErrs = append(p.envErrs, fmt.Sprintf("%s=%q: not a whole number", from, e))
		}
		*v = n
	}
	p.fs.IntVar(v, name, *v, usage+" ["+EnvName(name)+"]")
}

// define is the table of the runner's flags.
func (p *parser) define(c *Config) {
	p.str(&c.ServerPick, "server-pick", "which of --server's addresses to use first: random (a fleet spreads over the replicas) or first (the first that answers, as listed or resolved: a preferred replica)")
	p.str(&c.Server, "server", "server gRPC address host:port (a name with several addresses, or a comma-separated list of replicas: a replica that hangs is left for another)")
	p.str(&c.TokenFile, "token-file", "file holding this runner's token")
	p.str(&c.ID, "id", "runner id (the one the token is bound to)")
	p.str(&c.Runtime, "runtime", "docker or process (process: NO isolation)")
	p.str(&c.MetricsListen, "metrics-listen", "Prometheus /metrics listen address (empty = off)")
	p.str(&c.OTLPEndpoint, "otlp-endpoint", "export traces to this OTLP/gRPC collector (http://host:4317 plaintext, https:// or host:port TLS; empty = OTEL_EXPORTER_OTLP_ENDPOINT, else off)")
	p.str(&c.DataDir, "data-dir", "directory for session workspaces, gateway sockets and runner state")
	p.str(&c.AgentImage, "agent-image", "docker: agent image of groups without a base image")
	p.str(&c.AgentBinary, "agent-binary", "process: the agent binary")
	p.str(&c.TLSCA, "tls-ca", "CA file to verify the server's TLS certificate (empty = plaintext)")
	p.str(&c.TLSCert, "tls-cert", "client certificate file for a server that requires one (--tls-client-ca); needs --tls-ca")
	p.str(&c.TLSKey, "tls-key", "private key file of --tls-cert")
	p.str(&c.TLSServerName, "tls-server-name", "name the server's certificate must carry (default: the host of --server)")
	p.str(&c.LogLevel, "log-level", "debug, info, warn or error")
	p.str(&c.Host, "host", "host to register as: empty takes the one on the runner's token; anything else must be it")
	p.str(&c.ContainerCPUs, "container-cpus", "docker: CPU cap of agent containers whose group sets none, e.g. 2 (empty = no limit)")
	p.str(&c.ContainerMemory, "container-memory", "docker: memory cap of agent containers whose group sets none, e.g. 8g (empty = no limit)")
	p.str(&c.MCPNetwork, "mcp-network", "docker: network of guarded MCP servers' containers (default none; bridge for servers that call an API; agents never have one)")
	p.str(&c.BuildNetwork, "build-network", "docker: network of group image builds that install packages (default: Docker's bridge; host; none = installs fail)")
	p.dur(&c.IdleAfter, "idle-after", "stop an agent after this long without activity")
	p.dur(&c.DecideWait, "decide-wait", "how long an action waits for the guard before failing closed")
	p.dur(&c.InboxAckDeadline, "inbox-ack-deadline", "restart an agent that holds inbox items without acknowledging any for this long (its items are sent again)")
	p.float(&c.Gateway.Rate, "gateway-rate", "actions a second one session's agent may send (past it, a send is refused with when to retry)")
	p.int(&c.Gateway.Burst, "gateway-burst", "actions one session's agent may send at once, above --gateway-rate")
	p.int(&c.Gateway.InFlight, "gateway-in-flight", "actions of one session decided or running at once")
	p.defineEgress(c)
	p.defineModels(c)
	if v, _, ok := lookupEnv("group"); ok {
		c.Groups = splitList(v)
	}
	groupFlag := false
	p.fs.Func("group", "group id (or name) whose session this runner opens; repeatable ["+EnvName("group")+", comma-separated]", func(v string) error {
		if !groupFlag {
			c.Groups, groupFlag = nil, true // flags replace the env list
		}
		c.Groups = append(c.Groups, v)
		return nil
	})
	if v, from, ok := lookupEnv("agent-env"); ok {
		for _, kv := range splitList(v) {
			if err := addEnv(c.AgentEnv, kv); err != nil {
				p.envErrs = append(p.envErrs, from+": "+err.Error())
			}
		}
	}
	p.fs.Func("agent-env", "KEY=VALUE for every agent's environment; repeatable ["+EnvName("agent-env")+", comma-separated]", func(v string) error {
		return addEnv(c.AgentEnv, v)
	})
}

// notTaken refuses a runner left without a setting whose shared variable is
// set but was not taken (it belongs to another binary), saying so: without
// this, a runner started in the README's terminal took the operator's token
// and was refused by the server for a reason nobody could see.
func notTaken(c Config) error {
	for name, whose := range notTheRunners {
		legacy := legacyEnvName(name)
		if _, set := os.LookupEnv(legacy); !set {
			continue
		}
		var have string
		switch name {
		case "token-file":
			have = c.TokenFile
		case "tls-cert":
			have = c.TLSCert
		case "tls-key":
			have = c.TLSKey
		}
		if have == "" {
			return fmt.Errorf("%s is set, but the runner does not read it: it is %s; give the runner --%s or %s", legacy, whose, name, EnvName(name))
		}
	}
	return nil
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func addEnv(m map[string]string, kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || k == "" || strings.ContainsAny(k, " \t") {
		return fmt.Errorf("--agent-env %q: want KEY=VALUE", kv)
	}
	if agentenv.Reserved(k) {
		return fmt.Errorf("--agent-env %s: the runner sets it for every agent (its gateway, its way out, its model endpoint, its HOME and CA roots)", k)
	}
	m[k] = v
	return nil
}

// Validate checks the config; the error is one line naming the setting.
func (c Config) Validate() error {
	if c.ServerPick != "random" && c.ServerPick != "first" {
		return fmt.Errorf("--server-pick %q: want random or first", c.ServerPick)
	}
	for _, a := range strings.Split(c.Server, ",") {
		if _, _, err := net.SplitHostPort(strings.TrimSpace(a)); err != nil {
			return fmt.Errorf("--server %q: %v", c.Server, err)
		}
	}
	if c.TokenFile == "" {
		return errors.New("--token-file is required")
	}
	if !rt.ValidID(c.ID) {
		return fmt.Errorf("--id %q: want letters, digits, '.', '_' or '-' (at most 128)", c.ID)
	}
	switch c.Runtime {
	case "docker":
		if c.AgentImage == "" {
			return errors.New("--agent-image is required with --runtime docker")
		}
	case "process":
		if c.AgentBinary == "" {
			return errors.New("--agent-binary is required with --runtime process")
		}
		if fi, err := os.Stat(c.AgentBinary); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return fmt.Errorf("--agent-binary %q: not an executable file", c.AgentBinary)
		}
	default:
		return fmt.Errorf("--runtime %q: want docker or process", c.Runtime)
	}
	if c.MetricsListen != "" {
		if _, _, err := net.SplitHostPort(c.MetricsListen); err != nil {
			return fmt.Errorf("--metrics-listen %q: %v", c.MetricsListen, err)
		}
	}
	if c.DataDir == "" {
		return errors.New("--data-dir is required")
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("--tls-cert and --tls-key must be given together")
	}
	if c.TLSCA == "" && (c.TLSCert != "" || c.TLSServerName != "") {
		return errors.New("--tls-cert and --tls-server-name need --tls-ca (TLS is on only with a CA)")
	}
	if c.IdleAfter <= 0 || c.DecideWait <= 0 || c.InboxAckDeadline <= 0 {
		return errors.New("--idle-after, --decide-wait and --inbox-ack-deadline must be positive")
	}
	if !(c.Gateway.Rate > 0) || c.Gateway.Burst < 1 || c.Gateway.InFlight < 1 {
		return fmt.Errorf("--gateway-rate (%g), --gateway-burst (%d) and --gateway-in-flight (%d) must be positive", c.Gateway.Rate, c.Gateway.Burst, c.Gateway.InFlight)
	}
	for _, g := range c.Groups {
		if g == "" || strings.ContainsAny(g, " \t\n") {
			return fmt.Errorf("--group %q: not a group id or name", g)
		}
	}
	if err := c.validateEgress(); err != nil {
		return err
	}
	if err := c.validateModels(); err != nil {
		return err
	}
	if c.MCPNetwork == "" || strings.ContainsAny(c.MCPNetwork, " \t\n") {
		return fmt.Errorf("--mcp-network %q: want a Docker network name (none, bridge, ...)", c.MCPNetwork)
	}
	if c.BuildNetwork == "" || strings.ContainsAny(c.BuildNetwork, " \t\n") {
		return fmt.Errorf("--build-network %q: want a Docker network name (default, host, none, ...)", c.BuildNetwork)
	}
	if _, err := rt.ParseCPUs(c.ContainerCPUs); err != nil {
		return fmt.Errorf("--container-cpus: %v", err)
	}
	if _, err := rt.ParseMemory(c.ContainerMemory); err != nil {
		return fmt.Errorf("--container-memory: %v", err)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", c.LogLevel)
	}
	return nil
}

// Token reads the runner's token from TokenFile.
func (c Config) Token() (string, error) {
	b, err := os.ReadFile(c.TokenFile)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("--token-file %s is empty", c.TokenFile)
	}
	return tok, nil
}

// Level is LogLevel as a slog level (validated).
func (c Config) Level() slog.Level {
	return map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}[c.LogLevel]
}
