// Command clawguard-runner is the per-host enforcement point: it runs agent
// sessions (Docker containers, or plain processes), serves each one's agent
// gateway, and asks the guard before running any delivery action. main only
// wires.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/clawguard/clawguard/runner/internal/app"
	"github.com/clawguard/clawguard/runner/internal/config"
)

var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	cfg, err := config.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "clawguard-runner:", err)
		return 2
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.Level()}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	app.Version = version
	r, err := app.New(ctx, cfg, log)
	if err != nil {
		fmt.Fprintln(stderr, "clawguard-runner:", err)
		return 1
	}
	err = r.Run(ctx)
	var ce *app.ConformanceError
	switch {
	case errors.As(err, &ce):
		fmt.Fprint(stderr, ce.Banner())
		log.Error("guard conformance failure — refusing to start", "violations", ce.Violations)
		return 1
	case err != nil && !errors.Is(err, context.Canceled):
		fmt.Fprintln(stderr, "clawguard-runner:", err)
		return 1
	}
	return 0
}
