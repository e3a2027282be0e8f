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

	// Public roots compiled in, used only where the system has none (the
	// FROM scratch images): an HTTPS sink, a webhook, Postgres with
	// verify-full. A mounted bundle (SSL_CERT_FILE / SSL_CERT_DIR) or the
	// host's roots still take precedence.
	_ "golang.org/x/crypto/x509roots/fallback"
)

var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "--version" || args[0] == "version") {
		fmt.Println(version)
		return 0
	}
	cfg, err := config.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "clawguard-runner:", err)
		return 2
	}
	log := newLogger(stderr, cfg.Level())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	app.Version = version
	r, err := app.New(ctx, cfg, log)
	if err != nil {
		log.Error("could not start", "err", err)
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
		log.Error("stopped on error", "err", err)
		return 1
	}
	return 0
}

// newLogger is the process's one logger, JSON lines with durations as
// duration strings; also slog's (and the log package's) default, so a
// component built without a logger does not print in another format.
func newLogger(w io.Writer, level slog.Leveler) *slog.Logger {
	log := slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Value.Kind() == slog.KindDuration {
			return slog.String(a.Key, a.Value.Duration().String())
		}
		return a
	}}))
	slog.SetDefault(log)
	return log
}
