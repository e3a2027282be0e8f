// Command clawguard-slack is the reference Slack bridge: approvals,
// unknown senders and new channels approved from Slack, agent replies
// delivered back, over Socket Mode (no public endpoint). See cli/README.md.
package main

import (
	"log/slog"

	"google.golang.org/grpc"

	"github.com/clawguard/clawguard/cli/internal/bridge"
	"github.com/clawguard/clawguard/cli/internal/slack"

	// Public roots compiled in, used only where the system has none (the
	// FROM scratch images): an HTTPS sink, a webhook, Postgres with
	// verify-full. A mounted bundle (SSL_CERT_FILE / SSL_CERT_DIR) or the
	// host's roots still take precedence.
	_ "golang.org/x/crypto/x509roots/fallback"
)

// version is set at build time (-ldflags "-X main.version=...").
var version = "dev"

func main() {
	bridge.Main("clawguard-slack", version, func(args []string, getenv func(string) (string, bool)) (bridge.Config, bridge.Build, error) {
		cfg, err := slack.Parse(args, getenv)
		return cfg.Config, func(conn *grpc.ClientConn, log *slog.Logger) (bridge.Runner, error) {
			return slack.New(cfg, conn, log)
		}, err
	})
}
