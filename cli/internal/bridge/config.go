package bridge

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"
)

// Config is what every bridge can be told about the control plane and
// itself; each chat's Config embeds it and adds its platform's settings.
// Every flag has a CLAWGUARD_* environment twin; secrets come from files
// or the environment, never from a flag value.
type Config struct {
	Server        string        // control plane gRPC address
	TokenFile     string        // the bridge token (CLAWGUARD_TOKEN works too)
	Token         string        // resolved bridge token
	TLSCA         string        // CA for the server's certificate (empty = plaintext)
	TLSCert       string        // client certificate, for a server that requires mTLS
	TLSKey        string        // its key
	DataDir       string        // where the state file lives
	HTTPListen    string        // /healthz, /readyz and /metrics (empty = off)
	RetryMax      time.Duration // cap of the back-off after a failed call
	LogLevel      string
	ShutdownGrace time.Duration // how long in-flight work may finish on stop
	// ConsoleURL is the approvals console's base URL (https://console.example):
	// a step-up hold's card links to its page there instead of offering a
	// tap that cannot approve it. Empty = no link.
	ConsoleURL string
}

// Defaults is the common config before env and flags; dataDir and
// httpListen differ per bridge (two bridges may run side by side).
func Defaults(dataDir, httpListen string) Config {
	return Config{
		Server:        "127.0.0.1:7443",
		DataDir:       dataDir,
		HTTPListen:    httpListen,
		RetryMax:      10 * time.Second,
		LogLevel:      "info",
		ShutdownGrace: 10 * time.Second,
	}
}

// EnvName is the CLAWGUARD_* twin of a flag.
func EnvName(flagName string) string {
	return "CLAWGUARD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// TokenEnv holds the bridge token itself (instead of --token-file).
const TokenEnv = "CLAWGUARD_TOKEN"

// Flags is a bridge's command line: each flag reads its env twin first,
// and the command line wins over it.
type Flags struct {
	fs      *flag.FlagSet
	getenv  func(string) (string, bool)
	envErrs []string
}

// NewFlags starts the command line of program.
func NewFlags(program string, getenv func(string) (string, bool)) *Flags {
	fs := flag.NewFlagSet(program, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &Flags{fs: fs, getenv: getenv}
}

// String is a string flag with its env twin.
func (f *Flags) String(p *string, name, usage string) {
	if v, ok := f.getenv(EnvName(name)); ok {
		*p = v
	}
	f.fs.StringVar(p, name, *p, usage+" ["+EnvName(name)+"]")
}

// Duration is a duration flag with its env twin.
func (f *Flags) Duration(p *time.Duration, name, usage string) {
	if v, ok := f.getenv(EnvName(name)); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			f.envErrs = append(f.envErrs, fmt.Sprintf("%s=%q: not a duration", EnvName(name), v))
		}
		*p = d
	}
	f.fs.DurationVar(p, name, *p, usage+" ["+EnvName(name)+"]")
}

// Common registers the flags every bridge has.
func (f *Flags) Common(c *Config) {
	f.String(&c.Server, "server", "control plane gRPC address host:port")
	f.String(&c.TokenFile, "token-file", "file holding the bridge token (or set "+TokenEnv+")")
	f.String(&c.TLSCA, "tls-ca", "CA file to verify the server's TLS certificate (empty = plaintext)")
	f.String(&c.TLSCert, "tls-cert", "client certificate file, for a server that requires mutual TLS (with --tls-key and --tls-ca)")
	f.String(&c.TLSKey, "tls-key", "the client certificate's key file")
	f.String(&c.DataDir, "data-dir", "directory for the bridge's state file")
	f.String(&c.HTTPListen, "http-listen", "address of /healthz, /readyz and /metrics (empty = off)")
	f.String(&c.LogLevel, "log-level", "debug, info, warn or error")
	f.Duration(&c.RetryMax, "retry-max", "longest back-off between retries of a failed call")
	f.Duration(&c.ShutdownGrace, "shutdown-grace", "how long in-flight work may finish on stop")
	f.String(&c.ConsoleURL, "console-url", "the approvals console's base URL: step-up holds' cards link to the hold's page there (empty = no link)")
}

// Parse reads the command line (after the env twins) and then the bridge
// token; the error is one line. -h prints the flags and is flag.ErrHelp.
func (f *Flags) Parse(args []string, c *Config) error {
	if err := f.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			f.fs.SetOutput(os.Stderr)
			f.fs.PrintDefaults()
		}
		return err
	}
	if f.fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", f.fs.Arg(0))
	}
	if len(f.envErrs) > 0 {
		return errors.New(f.envErrs[0])
	}
	var err error
	c.Token, err = f.Secret("bridge token", c.TokenFile, "token-file", TokenEnv)
	return err
}

// Secret reads a file when one is named, else the environment variable.
func (f *Flags) Secret(what, file, fileFlag, env string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("%s: %w", what, err)
		}
		if v := strings.TrimSpace(string(b)); v != "" {
			return v, nil
		}
		return "", fmt.Errorf("%s: %s is empty", what, file)
	}
	if v, ok := f.getenv(env); ok && strings.TrimSpace(v) != "" {
		return strings.TrimSpace(v), nil
	}
	return "", fmt.Errorf("%s: name a file with --%s or set %s", what, fileFlag, env)
}

// Common is the common config itself (for a chat's config embedding it).
func (c Config) Common() Config { return c }

// Validate checks the common config; the error is one line.
func (c Config) Validate() error {
	switch {
	case c.Server == "":
		return errors.New("--server: required")
	case c.DataDir == "":
		return errors.New("--data-dir: required (the state file keeps cards and clicks across restarts)")
	case c.RetryMax <= 0:
		return errors.New("--retry-max: must be positive")
	case (c.TLSCert == "") != (c.TLSKey == ""):
		return errors.New("--tls-cert and --tls-key go together")
	case c.TLSCert != "" && c.TLSCA == "":
		return errors.New("--tls-cert: needs --tls-ca (a client certificate is for a TLS connection)")
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", c.LogLevel)
	}
	if c.ConsoleURL != "" {
		u, err := url.Parse(c.ConsoleURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("--console-url %q: want the console's http(s) base URL", c.ConsoleURL)
		}
	}
	return nil
}

// HoldPage is a hold's page in the console at base ("" without a base).
func HoldPage(base, holdID string) string {
	if base == "" {
		return ""
	}
	return strings.TrimRight(base, "/") + "/holds/" + url.PathEscape(holdID)
}
