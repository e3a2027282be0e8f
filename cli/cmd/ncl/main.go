// Command ncl is the admin and approver CLI of Clawguard.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/clawguard/clawguard/cli/internal/ncl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := ncl.Run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}
