package telegram

import (
	"fmt"
	"net/url"
	"time"

	"google.golang.org/grpc"

	"github.com/clawguard/clawguard/cli/internal/bridge"
)

// ChannelType is the channel namespace of this bridge: chats are
// "telegram" messaging groups and users are "telegram:<numeric user id>".
const ChannelType = "telegram"

// Config is everything clawguard-telegram can be told: the common bridge
// settings and Telegram's. Every flag has a CLAWGUARD_* environment twin;
// secrets come from files or the environment, never from a flag value.
type Config struct {
	bridge.Config
	BotTokenFile string        // the Telegram bot token (CLAWGUARD_TELEGRAM_BOT_TOKEN works too)
	BotToken     string        // resolved bot token
	APIURL       string        // Telegram Bot API base URL
	PollTimeout  time.Duration // getUpdates long-poll timeout
}

// Default is the config before env and flags.
func Default() Config {
	return Config{
		Config:      bridge.Defaults(".data/telegram", "127.0.0.1:9466"),
		APIURL:      "https://api.telegram.org",
		PollTimeout: 30 * time.Second,
	}
}

// Parse reads env twins, then flags (flags win), then the secrets. The
// error is one line.
func Parse(args []string, getenv func(string) (string, bool)) (Config, error) {
	c := Default()
	f := bridge.NewFlags("clawguard-telegram", getenv)
	f.Common(&c.Config)
	f.String(&c.BotTokenFile, "telegram-bot-token-file", "file holding the Telegram bot token (or set CLAWGUARD_TELEGRAM_BOT_TOKEN)")
	f.String(&c.APIURL, "telegram-api-url", "Telegram Bot API base URL")
	f.Duration(&c.PollTimeout, "poll-timeout", "Telegram getUpdates long-poll timeout")
	if err := f.Parse(args, &c.Config); err != nil {
		return c, err
	}
	var err error
	if c.BotToken, err = f.Secret("Telegram bot token", c.BotTokenFile, "telegram-bot-token-file", "CLAWGUARD_TELEGRAM_BOT_TOKEN"); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// Validate checks the config; the error is one line.
func (c Config) Validate() error {
	if err := c.Config.Validate(); err != nil {
		return err
	}
	if c.PollTimeout < time.Second {
		return fmt.Errorf("--poll-timeout: at least 1s")
	}
	u, err := url.Parse(c.APIURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("--telegram-api-url %q: want an http(s) URL", c.APIURL)
	}
	return nil
}

// Dial connects to the control plane with the bridge token (bridge.Dial).
func Dial(cfg Config) (*grpc.ClientConn, error) {
	return bridge.Dial(cfg.Config, "clawguard-telegram")
}
