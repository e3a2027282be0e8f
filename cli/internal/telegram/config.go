package telegram

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

// ChannelType is the channel namespace of this bridge: chats are
// "telegram" messaging groups and users are "telegram:<numeric user id>".
const ChannelType = "telegram"

// Config is everything clawguard-telegram can be told. Every flag has a
// CLAWGUARD_* environment twin; secrets come from files or the
// environment, never from a flag value.
type Config struct {
	Server        string        // control plane gRPC address
	TokenFile     string        // the bridge token (CLAWGUARD_TOKEN works too)
	Token         string        // resolved bridge token
	TLSCA         string        // CA for the server's certificate (empty = plaintext)
	BotTokenFile  string        // the Telegram bot token (CLAWGUARD_TELEGRAM_BOT_TOKEN works too)
	BotToken      string        // resolved bot token
	APIURL        string        // Telegram Bot API base URL
	DataDir       string        // where the state file lives
	HTTPListen    string        // /healthz, /readyz and /metrics (empty = off)
	PollTimeout   time.Duration // getUpdates long-poll timeout
	RetryMax      time.Duration // cap of the back-off after a failed call
	LogLevel      string
	ShutdownGrace time.Duration // how long in-flight work may finish on stop
}

// Default is the config before env and flags.
func Default() Config {
	return Config{
		Server:        "127.0.0.1:7443",
		APIURL:        "https://api.telegram.org",
		DataDir:       ".data/telegram",
		HTTPListen:    "127.0.0.1:9466",
		PollTimeout:   30 * time.Second,
		RetryMax:      10 * time.Second,
		LogLevel:      "info",
		ShutdownGrace: 10 * time.Second,
	}
}

// EnvName is the CLAWGUARD_* twin of a flag.
func EnvName(flagName string) string {
	return "CLAWGUARD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Parse reads env twins, then flags (flags win), then the secrets. The
// error is one line.
func Parse(args []string, getenv func(string) (string, bool)) (Config, error) {
	c := Default()
	fs := flag.NewFlagSet("clawguard-telegram", flag.ContinueOnError)
	var envErrs []string
	str := func(p *string, name, usage string) {
		if v, ok := getenv(EnvName(name)); ok {
			*p = v
		}
		fs.StringVar(p, name, *p, usage+" ["+EnvName(name)+"]")
	}
	dur := func(p *time.Duration, name, usage string) {
		if v, ok := getenv(EnvName(name)); ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				envErrs = append(envErrs, fmt.Sprintf("%s=%q: not a duration", EnvName(name), v))
			}
			*p = d
		}
		fs.DurationVar(p, name, *p, usage+" ["+EnvName(name)+"]")
	}
	str(&c.Server, "server", "control plane gRPC address host:port")
	str(&c.TokenFile, "token-file", "file holding the bridge token (or set CLAWGUARD_TOKEN)")
	str(&c.TLSCA, "tls-ca", "CA file to verify the server's TLS certificate (empty = plaintext)")
	str(&c.BotTokenFile, "telegram-bot-token-file", "file holding the Telegram bot token (or set CLAWGUARD_TELEGRAM_BOT_TOKEN)")
	str(&c.APIURL, "telegram-api-url", "Telegram Bot API base URL")
	str(&c.DataDir, "data-dir", "directory for the bridge's state file")
	str(&c.HTTPListen, "http-listen", "address of /healthz, /readyz and /metrics (empty = off)")
	str(&c.LogLevel, "log-level", "debug, info, warn or error")
	dur(&c.PollTimeout, "poll-timeout", "Telegram getUpdates long-poll timeout")
	dur(&c.RetryMax, "retry-max", "longest back-off between retries of a failed call")
	dur(&c.ShutdownGrace, "shutdown-grace", "how long in-flight work may finish on stop")
	fs.SetOutput(io.Discard)
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
	if len(envErrs) > 0 {
		return c, errors.New(envErrs[0])
	}
	var err error
	if c.Token, err = secret("bridge token", c.TokenFile, "CLAWGUARD_TOKEN", getenv); err != nil {
		return c, err
	}
	if c.BotToken, err = secret("Telegram bot token", c.BotTokenFile, "CLAWGUARD_TELEGRAM_BOT_TOKEN", getenv); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// secret reads a file when one is named, else the environment variable.
func secret(what, file, env string, getenv func(string) (string, bool)) (string, error) {
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
	if v, ok := getenv(env); ok && strings.TrimSpace(v) != "" {
		return strings.TrimSpace(v), nil
	}
	return "", fmt.Errorf("%s: name a file with --%s or set %s", what, fileFlag[env], env)
}

var fileFlag = map[string]string{
	"CLAWGUARD_TOKEN":              "token-file",
	"CLAWGUARD_TELEGRAM_BOT_TOKEN": "telegram-bot-token-file",
}

// Validate checks the config; the error is one line.
func (c Config) Validate() error {
	switch {
	case c.Server == "":
		return errors.New("--server: required")
	case c.DataDir == "":
		return errors.New("--data-dir: required (the state file keeps cards and clicks across restarts)")
	case c.PollTimeout < time.Second:
		return errors.New("--poll-timeout: at least 1s")
	case c.RetryMax <= 0:
		return errors.New("--retry-max: must be positive")
	}
	u, err := url.Parse(c.APIURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("--telegram-api-url %q: want an http(s) URL", c.APIURL)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", c.LogLevel)
	}
	return nil
}
