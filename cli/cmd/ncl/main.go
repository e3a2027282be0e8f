// Command ncl is the admin and approver CLI of Clawguard.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/clawguard/clawguard/cli/internal/ncl"

	// Public roots compiled in, used only where the system has none (the
	// FROM scratch images): an HTTPS sink, a webhook, Postgres with
	// verify-full. A mounted bundle (SSL_CERT_FILE / SSL_CERT_DIR) or the
	// host's roots still take precedence.
	_ "golang.org/x/crypto/x509roots/fallback"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := ncl.Run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}
