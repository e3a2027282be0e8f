// Package config is the server's one config struct: defaults, flags with
// CLAWGUARD_* env twins, and validation. Bad config is one clear line.
package config

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/clawguard/clawguard/server/internal/logs"
)

// Config is everything `clawguard-server serve` can be told.
type Config struct {
	// ConfigFile is a YAML file of settings (keys: the flags' names),
	// below the command line and the environment (proto/flagfile).
	ConfigFile        string
	DatabaseURL       string
	Listen            string
	MetricsListen     string
	AutoMigrate       bool
	OperatorTokenFile string
	TLSCert           string
	TLSKey            string
	TLSClientCA       string
	// DefaultHoldTTL applies to holds created without an expiry; 0 = never.
	DefaultHoldTTL time.Duration
	// GlobalHoldApprovals and GroupHoldApprovals are the distinct approvals a
	// hold of that approver scope needs by default (quorum; a catalog
	// action's or a group's setting may ask for more, never fewer).
	GlobalHoldApprovals int
	GroupHoldApprovals  int
	// StandingGrantMax caps a standing grant (an approval "for N hours" or
	// "for this session"); 0 = standing grants are off, approvals are once.
	StandingGrantMax time.Duration
	// LeaseTTL is how long a runner's lease lasts without a heartbeat.
	LeaseTTL time.Duration
	// CitationWindow is how old an ALLOW decision may be when a runner cites it.
	CitationWindow time.Duration
	// PushAckDeadline is how long a push may go unacknowledged on a live
	// runner stream before it is sent again.
	PushAckDeadline time.Duration
	// DecisionRetention is how long the decision log is kept; 0 = forever.
	// At least 10 citation windows, so a citable decision is never deleted.
	DecisionRetention time.Duration
	// EventRetention is how long hold events are kept (a pending hold's
	// are kept until it resolves); 0 = forever.
	EventRetention time.Duration
	// DecisionExportURL receives the decision log as gzip NDJSON batches
	// (decexport), signed with DecisionExportSecretFile's secret and/or
	// carrying DecisionExportTokenFile's bearer token. While it is set,
	// retention never drops what is not yet exported.
	DecisionExportURL        string
	DecisionExportSecretFile string
	DecisionExportTokenFile  string
	// WebhookURL receives every hold lifecycle event, signed with WebhookSecretFile's secret.
	WebhookURL        string
	WebhookSecretFile string
	ShutdownTimeout   time.Duration
	// ConnectionMaxAge is how long a client connection lives before the
	// replica sends it GOAWAY (±10%): the runners reconnect to a random
	// replica, so a fleet spreads over the replicas again after a restart.
	ConnectionMaxAge time.Duration
	LogLevel         string
	// MaxConns bounds the database pool.
	MaxConns int
	// AdmissionTarget is the decision latency above which admission control
	// lowers its limit on decisions in flight; 0 turns admission control off.
	AdmissionTarget time.Duration
	// AdmissionMaxInFlight caps the adaptive limit.
	AdmissionMaxInFlight int
	// AdmissionMaxRetryAfter caps the retry hint a refused caller gets: a
	// longer cap keeps an overloaded server's goodput (fewer re-asks to
	// refuse), a shorter one re-asks sooner after a spike.
	AdmissionMaxRetryAfter time.Duration
	// GuardPipelines is how many batches of decision reads and log rows
	// may be in flight to Postgres at once (each on its own connection).
	GuardPipelines int
	// FactSnapshot keeps the tables the guard's lookups read in memory, so
	// a decision skips the facts read (package snapshot); a decision made
	// from it is logged only while the database is still at its revision.
	FactSnapshot bool
	// DecisionLogCommit is how the log rows of plain decisions (no grant
	// consumed, no hold created) commit: "sync", the default (each batch
	// waits for its WAL flush: an answer leaves only once its row survives
	// a crash), or "async", an explicit opt-in (synchronous_commit off:
	// visible to every replica at once, on disk within 3 × wal_writer_delay;
	// a Postgres crash can lose the last moments' rows of answered
	// decisions nothing cited yet).
	DecisionLogCommit string
	// Pprof serves Go's profiles (net/http/pprof) under /debug/pprof/ on
	// the metrics listener, for performance work; off by default.
	Pprof bool
	// ConsoleListen serves the approvals console ("" = off), with the gRPC
	// listener's TLS certificate when one is set. It asks no client
	// certificate (each user signs in with their own token) unless
	// ConsoleClientCA names a CA it must be signed by.
	ConsoleListen   string
	ConsoleClientCA string
	// ConsoleSessionTTL is how long a console sign-in lasts.
	ConsoleSessionTTL time.Duration
	// OIDC sign-in for the console (off while OIDCIssuer is unset): the
	// provider's issuer URL, the console's client id and the file holding
	// its secret, and the console's callback URL as registered at the
	// provider (https://console.example.com/signin/oidc/callback).
	OIDCIssuer           string
	OIDCClientID         string
	OIDCClientSecretFile string
	OIDCRedirectURL      string
	// OTLPEndpoint exports traces over OTLP/gRPC ("" = the standard
	// OTEL_EXPORTER_OTLP_ENDPOINT, else off); see proto/telemetry.
	OTLPEndpoint string
}

// MaxApprovals bounds any quorum (the holds table checks it too).
const MaxApprovals = 10

// Default is the config before flags and env.
func Default() Config {
	return Config{
		Listen:                 "127.0.0.1:7443",
		MetricsListen:          "127.0.0.1:9464",
		DefaultHoldTTL:         72 * time.Hour,
		GlobalHoldApprovals:    1,
		GroupHoldApprovals:     1,
		StandingGrantMax:       24 * time.Hour,
		LeaseTTL:               15 * time.Second,
		CitationWindow:         2 * time.Minute,
		PushAckDeadline:        30 * time.Second,
		DecisionRetention:      720 * time.Hour,
		EventRetention:         720 * time.Hour,
		ShutdownTimeout:        10 * time.Second,
		ConnectionMaxAge:       15 * time.Minute,
		LogLevel:               "info",
		MaxConns:               32,
		AdmissionTarget:        20 * time.Millisecond,
		AdmissionMaxInFlight:   4096,
		AdmissionMaxRetryAfter: 2 * time.Second,
		GuardPipelines:         2,
		FactSnapshot:           true,
		DecisionLogCommit:      "sync",
		ConsoleSessionTTL:      8 * time.Hour,
	}
}

// ConfigEnv is --config's environment twin: not CLAWGUARD_CONFIG, which is
// ncl's.
const ConfigEnv = "CLAWGUARD_SERVER_CONFIG"

// Bind registers the serve flags on fs, each defaulting to its env twin.
func (c *Config) Bind(fs *flag.FlagSet) {
	if v, ok := os.LookupEnv(ConfigEnv); ok {
		c.ConfigFile = v
	}
	fs.StringVar(&c.ConfigFile, "config", c.ConfigFile, "YAML file of settings, keys named as these flags; flags, then the environment, win over it ["+ConfigEnv+"]")
	str(fs, &c.DatabaseURL, "database-url", "Postgres URL")
	str(fs, &c.Listen, "listen", "gRPC listen address")
	str(fs, &c.MetricsListen, "metrics-listen", "Prometheus /metrics listen address (empty = off)")
	boolean(fs, &c.AutoMigrate, "auto-migrate", "apply migrations before serving")
	str(fs, &c.OperatorTokenFile, "operator-token-file", "file holding the operator token (created on first start)")
	str(fs, &c.TLSCert, "tls-cert", "TLS certificate file")
	str(fs, &c.TLSKey, "tls-key", "TLS key file")
	str(fs, &c.TLSClientCA, "tls-client-ca", "CA file for client certificates (mTLS)")
	dur(fs, &c.DefaultHoldTTL, "default-hold-ttl", "expiry of holds created without one (0 = never)")
	integer(fs, &c.GlobalHoldApprovals, "global-hold-approvals", "distinct approvals a global-scope hold needs (quorum, 1-10)")
	integer(fs, &c.GroupHoldApprovals, "group-hold-approvals", "distinct approvals a group-scope hold needs (quorum, 1-10)")
	dur(fs, &c.StandingGrantMax, "standing-grant-max", "longest standing grant an approver may give (approve for N hours or for the session; 0 = approvals are once only)")
	dur(fs, &c.LeaseTTL, "lease-ttl", "runner lease duration")
	dur(fs, &c.CitationWindow, "citation-window", "max age of a cited ALLOW decision")
	dur(fs, &c.PushAckDeadline, "push-ack-deadline", "how long a push may go unacknowledged on a live runner stream before it is sent again")
	dur(fs, &c.DecisionRetention, "decision-retention", "how long decisions are kept (0 = forever; at least 10 citation windows)")
	dur(fs, &c.EventRetention, "event-retention", "how long hold events are kept (0 = forever)")
	str(fs, &c.DecisionExportURL, "decision-export-url", "URL receiving the decision log as gzip NDJSON batches (long-term audit)")
	str(fs, &c.DecisionExportSecretFile, "decision-export-secret-file", "file holding the HMAC secret signing decision export batches")
	str(fs, &c.DecisionExportTokenFile, "decision-export-token-file", "file holding a bearer token sent with decision export batches")
	str(fs, &c.WebhookURL, "webhook-url", "URL receiving signed hold lifecycle events")
	str(fs, &c.WebhookSecretFile, "webhook-secret-file", "file holding the webhook HMAC secret")
	dur(fs, &c.ShutdownTimeout, "shutdown-timeout", "graceful shutdown deadline")
	dur(fs, &c.ConnectionMaxAge, "connection-max-age", "a client connection's life before the replica asks it to reconnect (GOAWAY; runners move their streams and land on a random replica, so they spread again after a restart)")
	str(fs, &c.LogLevel, "log-level", "debug, info, warn or error")
	integer(fs, &c.MaxConns, "max-conns", "database pool size")
	dur(fs, &c.AdmissionTarget, "admission-target", "decision latency above which decisions in flight are limited, the rest refused with ResourceExhausted (0 = off)")
	integer(fs, &c.AdmissionMaxInFlight, "admission-max-inflight", "upper bound of the adaptive limit on decisions in flight")
	dur(fs, &c.AdmissionMaxRetryAfter, "admission-max-retry-after", "upper bound of the retry hint refused decisions get (it grows while refusals outnumber a fifth of the admitted decisions; at least twice --admission-target)")
	integer(fs, &c.GuardPipelines, "guard-pipelines", "decision batches (facts reads and log rows) in flight to Postgres at once")
	boolean(fs, &c.FactSnapshot, "fact-snapshot", "decide from an in-memory copy of the guard's fact tables, checked against the database's revision when each decision is logged (false = read every decision's facts)")
	str(fs, &c.DecisionLogCommit, "decision-log-commit", "how plain decisions' log rows commit: sync (the default: an answer leaves once its row is on disk) or async (opt-in: the answer does not wait for the disk; a Postgres crash can lose the last moments' rows of answered decisions)")
	boolean(fs, &c.Pprof, "pprof", "serve Go's profiles at /debug/pprof/ on the metrics listener")
	str(fs, &c.ConsoleListen, "console-listen", "approvals console (web) listen address (empty = off)")
	str(fs, &c.ConsoleClientCA, "console-client-ca", "CA file the console's browsers' client certificates must chain to (empty = the console asks none, even with --tls-client-ca: users sign in with their tokens)")
	dur(fs, &c.ConsoleSessionTTL, "console-session-ttl", "how long a console sign-in lasts")
	str(fs, &c.OIDCIssuer, "oidc-issuer", "OIDC provider's issuer URL for console sign-in (empty = off)")
	str(fs, &c.OIDCClientID, "oidc-client-id", "the console's OIDC client id")
	str(fs, &c.OIDCClientSecretFile, "oidc-client-secret-file", "file holding the console's OIDC client secret")
	str(fs, &c.OIDCRedirectURL, "oidc-redirect-url", "the console's OIDC callback URL as registered at the provider (…/signin/oidc/callback)")
	str(fs, &c.OTLPEndpoint, "otlp-endpoint", "export traces to this OTLP/gRPC collector (http://host:4317 plaintext, https:// or host:port TLS; empty = OTEL_EXPORTER_OTLP_ENDPOINT, else off)")
}

// BindDatabase registers only --database-url (for `migrate`).
func (c *Config) BindDatabase(fs *flag.FlagSet) {
	str(fs, &c.DatabaseURL, "database-url", "Postgres URL")
}

// EnvName is the CLAWGUARD_* twin of a flag.
func EnvName(flagName string) string {
	return "CLAWGUARD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// validateConsole checks the console's settings: its address, its sign-in
// (OIDC, session TTL) and its client CA.
func (c Config) validateConsole() error {
	if c.ConsoleListen != "" {
		if _, _, err := net.SplitHostPort(c.ConsoleListen); err != nil {
			return fmt.Errorf("--console-listen %q: %v", c.ConsoleListen, err)
		}
	}
	if err := c.validateOIDC(); err != nil {
		return err
	}
	if c.ConsoleSessionTTL <= 0 {
		return errors.New("--console-session-ttl must be positive")
	}
	if c.ConsoleClientCA != "" && (c.TLSCert == "" || c.ConsoleListen == "") {
		return errors.New("--console-client-ca needs --console-listen, --tls-cert and --tls-key")
	}
	return nil
}

// Validate checks the config; the error is one line naming the setting.
func (c Config) Validate() error {
	if len(envErrors) > 0 {
		return errors.New(envErrors[0])
	}
	if err := ValidateDatabaseURL(c.DatabaseURL); err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("--listen %q: %v", c.Listen, err)
	}
	if c.MetricsListen != "" {
		if _, _, err := net.SplitHostPort(c.MetricsListen); err != nil {
			return fmt.Errorf("--metrics-listen %q: %v", c.MetricsListen, err)
		}
	}
	if err := c.validateConsole(); err != nil {
		return err
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	if c.TLSClientCA != "" && c.TLSCert == "" {
		return errors.New("--tls-client-ca needs --tls-cert and --tls-key")
	}
	if c.DefaultHoldTTL < 0 || c.LeaseTTL <= 0 || c.CitationWindow <= 0 || c.PushAckDeadline <= 0 || c.ShutdownTimeout <= 0 || c.ConnectionMaxAge <= 0 {
		return errors.New("durations must be positive (--default-hold-ttl may be 0 for never)")
	}
	if c.DecisionRetention < 0 || c.EventRetention < 0 {
		return errors.New("--decision-retention and --event-retention must not be negative (0 = keep forever)")
	}
	if c.DecisionRetention > 0 && c.DecisionRetention < 10*c.CitationWindow {
		return fmt.Errorf("--decision-retention %s: must be at least 10 citation windows (%s) or 0 for forever", c.DecisionRetention, 10*c.CitationWindow)
	}
	if c.DecisionExportURL != "" {
		if u, err := url.Parse(c.DecisionExportURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			return fmt.Errorf("--decision-export-url %q: want an http(s) URL", c.DecisionExportURL)
		}
	}
	if c.WebhookURL != "" {
		if u, err := url.Parse(c.WebhookURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			return fmt.Errorf("--webhook-url %q: want an http(s) URL", c.WebhookURL)
		}
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", c.LogLevel)
	}
	if c.StandingGrantMax < 0 {
		return fmt.Errorf("--standing-grant-max: must not be negative")
	}
	if c.GlobalHoldApprovals < 1 || c.GlobalHoldApprovals > MaxApprovals || c.GroupHoldApprovals < 1 || c.GroupHoldApprovals > MaxApprovals {
		return fmt.Errorf("--global-hold-approvals and --group-hold-approvals: want 1 to %d", MaxApprovals)
	}
	if c.GuardPipelines < 1 || c.GuardPipelines > c.MaxConns {
		return fmt.Errorf("--guard-pipelines %d: want 1 to --max-conns (%d)", c.GuardPipelines, c.MaxConns)
	}
	if c.DecisionLogCommit != "async" && c.DecisionLogCommit != "sync" {
		return fmt.Errorf("--decision-log-commit %q: want async or sync", c.DecisionLogCommit)
	}
	if c.AdmissionTarget < 0 || c.AdmissionMaxInFlight < 8 {
		return errors.New("--admission-target must not be negative and --admission-max-inflight at least 8")
	}
	if c.AdmissionMaxRetryAfter <= 0 {
		// Below twice the target it is raised to that (the hint's floor), as
		// before the setting existed: a long target with the default cap boots.
		return fmt.Errorf("--admission-max-retry-after %s: want a positive duration", c.AdmissionMaxRetryAfter)
	}
	if c.MaxConns < 2 {
		return errors.New("--max-conns must be at least 2")
	}
	return nil
}

// ValidateDatabaseURL checks a Postgres URL without connecting.
func ValidateDatabaseURL(raw string) error {
	if raw == "" {
		return fmt.Errorf("--database-url (or %s) is required", EnvName("database-url"))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("--database-url: malformed URL: %v", stripSecret(err.Error(), raw))
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return fmt.Errorf("--database-url: scheme %q, want postgres://", u.Scheme)
	}
	if u.Host == "" && u.Query().Get("host") == "" {
		return errors.New("--database-url: no host")
	}
	return nil
}

// Redacted is the config with secrets removed, for the start-up log line.
func (c Config) Redacted() Config {
	r := c
	r.DatabaseURL = RedactURL(c.DatabaseURL)
	r.WebhookURL = RedactURL(c.WebhookURL)
	r.DecisionExportURL = RedactURL(c.DecisionExportURL)
	return r
}

// RedactURL hides a URL's password, in its userinfo or its query string.
func RedactURL(raw string) string { return logs.RedactURL(raw) }

// LogValue logs the config as fields (secrets redacted, durations as
// durations), not as one Go struct string.
func (c Config) LogValue() slog.Value {
	r := c.Redacted()
	return slog.GroupValue(
		slog.String("database_url", r.DatabaseURL), slog.String("listen", r.Listen),
		slog.String("metrics_listen", r.MetricsListen), slog.Bool("auto_migrate", r.AutoMigrate),
		slog.String("operator_token_file", r.OperatorTokenFile), slog.String("tls_cert", r.TLSCert),
		slog.String("tls_key", r.TLSKey), slog.String("tls_client_ca", r.TLSClientCA),
		slog.String("default_hold_ttl", r.DefaultHoldTTL.String()), slog.String("lease_ttl", r.LeaseTTL.String()),
		slog.String("citation_window", r.CitationWindow.String()), slog.String("decision_retention", r.DecisionRetention.String()),
		slog.String("event_retention", r.EventRetention.String()), slog.String("webhook_url", r.WebhookURL), slog.String("decision_export_url", r.DecisionExportURL),
		slog.String("webhook_secret_file", r.WebhookSecretFile), slog.String("shutdown_timeout", r.ShutdownTimeout.String()),
		slog.String("log_level", r.LogLevel), slog.Int("max_conns", r.MaxConns), slog.String("otlp_endpoint", r.OTLPEndpoint),
	)
}

func stripSecret(msg, raw string) string {
	return strings.ReplaceAll(msg, raw, RedactURL(raw))
}

// envErrors collects env twins that did not parse; Validate reports them.
var envErrors []string

func envErr(name, v string) {
	envErrors = append(envErrors, fmt.Sprintf("%s=%q: not a valid value for --%s", EnvName(name), v, name))
}

func str(fs *flag.FlagSet, p *string, name, usage string) {
	if v, ok := os.LookupEnv(EnvName(name)); ok {
		*p = v
	}
	fs.StringVar(p, name, *p, usage+" ["+EnvName(name)+"]")
}

func boolean(fs *flag.FlagSet, p *bool, name, usage string) {
	if v, ok := os.LookupEnv(EnvName(name)); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			envErr(name, v)
		}
		*p = b
	}
	fs.BoolVar(p, name, *p, usage+" ["+EnvName(name)+"]")
}

func dur(fs *flag.FlagSet, p *time.Duration, name, usage string) {
	if v, ok := os.LookupEnv(EnvName(name)); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			envErr(name, v)
		}
		*p = d
	}
	fs.DurationVar(p, name, *p, usage+" ["+EnvName(name)+"]")
}

func integer(fs *flag.FlagSet, p *int, name, usage string) {
	if v, ok := os.LookupEnv(EnvName(name)); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			envErr(name, v)
		}
		*p = n
	}
	fs.IntVar(p, name, *p, usage+" ["+EnvName(name)+"]")
}

// FromEnv says whether a flag's value came from its environment twin: a
// config file does not override it.
func FromEnv(flagName string) bool {
	_, ok := os.LookupEnv(EnvName(flagName))
	return ok
}

// validateOIDC: all four OIDC settings or none, and only with the console.
func (c Config) validateOIDC() error {
	set := []bool{c.OIDCIssuer != "", c.OIDCClientID != "", c.OIDCClientSecretFile != "", c.OIDCRedirectURL != ""}
	if !set[0] && !set[1] && !set[2] && !set[3] {
		return nil
	}
	if !set[0] || !set[1] || !set[2] || !set[3] {
		return errors.New("--oidc-issuer, --oidc-client-id, --oidc-client-secret-file and --oidc-redirect-url go together")
	}
	if c.ConsoleListen == "" {
		return errors.New("--oidc-issuer signs in to the console: set --console-listen too")
	}
	for name, v := range map[string]string{"--oidc-issuer": c.OIDCIssuer, "--oidc-redirect-url": c.OIDCRedirectURL} {
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s %q: want an http(s) URL", name, v)
		}
	}
	if u, _ := url.Parse(c.OIDCRedirectURL); u.Path != "/signin/oidc/callback" {
		return fmt.Errorf("--oidc-redirect-url %q: the console's callback path is /signin/oidc/callback", c.OIDCRedirectURL)
	}
	return nil
}
