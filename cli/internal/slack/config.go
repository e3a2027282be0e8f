package slack

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"google.golang.org/grpc"

	"github.com/clawguard/clawguard/cli/internal/bridge"
)

// ChannelType is the channel namespace of this bridge: chats are "slack"
// messaging groups keyed by the channel id (a DM by its user's id) and
// users are "slack:<Slack user id>".
const ChannelType = "slack"

// Config is everything clawguard-slack can be told: the common bridge
// settings and Slack's. Every flag has a CLAWGUARD_* environment twin;
// secrets come from files or the environment, never from a flag value.
type Config struct {
	bridge.Config
	BotTokenFile string // the bot token, xoxb-… (CLAWGUARD_SLACK_BOT_TOKEN works too)
	BotToken     string
	AppTokenFile string // the app-level token with connections:write, xapp-… (CLAWGUARD_SLACK_APP_TOKEN works too)
	AppToken     string
	APIURL       string // Slack Web API base URL, ending in "/"
}

// Default is the config before env and flags.
func Default() Config {
	return Config{
		Config: bridge.Defaults(".data/slack", "127.0.0.1:9467"),
		APIURL: "https://slack.com/api/",
	}
}

// Parse reads env twins, then flags (flags win), then the secrets. The
// error is one line.
func Parse(args []string, getenv func(string) (string, bool)) (Config, error) {
	c := Default()
	f := bridge.NewFlags("clawguard-slack", getenv)
	f.Common(&c.Config)
	f.String(&c.BotTokenFile, "slack-bot-token-file", "file holding the Slack bot token, xoxb-… (or set CLAWGUARD_SLACK_BOT_TOKEN)")
	f.String(&c.AppTokenFile, "slack-app-token-file", "file holding the Slack app-level token for Socket Mode, xapp-… (or set CLAWGUARD_SLACK_APP_TOKEN)")
	f.String(&c.APIURL, "slack-api-url", "Slack Web API base URL")
	if err := f.Parse(args, &c.Config); err != nil {
		return c, err
	}
	var err error
	if c.BotToken, err = f.Secret("Slack bot token", c.BotTokenFile, "slack-bot-token-file", "CLAWGUARD_SLACK_BOT_TOKEN"); err != nil {
		return c, err
	}
	if c.AppToken, err = f.Secret("Slack app-level token", c.AppTokenFile, "slack-app-token-file", "CLAWGUARD_SLACK_APP_TOKEN"); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// Validate checks the config; the error is one line.
func (c Config) Validate() error {
	if err := c.Config.Validate(); err != nil {
		return err
	}
	// The two tokens are easily swapped; say so rather than fail later
	// with Slack's "not_allowed_token_type".
	switch {
	case !strings.HasPrefix(c.BotToken, "xoxb-"):
		return errors.New("Slack bot token: want the bot user OAuth token, xoxb-…")
	case !strings.HasPrefix(c.AppToken, "xapp-"):
		return errors.New("Slack app-level token: want an app-level token with connections:write, xapp-…")
	}
	u, err := url.Parse(c.APIURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("--slack-api-url %q: want an http(s) URL", c.APIURL)
	}
	return nil
}

// apiURL is the base URL as slack-go joins it (method names appended).
func (c Config) apiURL() string {
	return strings.TrimRight(c.APIURL, "/") + "/"
}

// Dial connects to the control plane with the bridge token (bridge.Dial).
func Dial(cfg Config) (*grpc.ClientConn, error) {
	return bridge.Dial(cfg.Config, "clawguard-slack")
}
