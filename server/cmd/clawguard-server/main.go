// Command clawguard-server is the Clawguard control plane: Guard, Approvals
// and Registry over gRPC, backed by Postgres. main only wires.
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
	"runtime/debug"
	"syscall"
	"time"

	"github.com/clawguard/clawguard/migrations"
	"github.com/clawguard/clawguard/proto/flagfile"
	"github.com/clawguard/clawguard/server/internal/app"
	"github.com/clawguard/clawguard/server/internal/config"
	"github.com/clawguard/clawguard/server/internal/logs"
	"github.com/clawguard/clawguard/server/internal/store"

	// Public roots compiled in, used only where the system has none (the
	// FROM scratch images): an HTTPS sink, a webhook, Postgres with
	// verify-full. A mounted bundle (SSL_CERT_FILE / SSL_CERT_DIR) or the
	// host's roots still take precedence.
	_ "golang.org/x/crypto/x509roots/fallback"
)

const usage = `usage: clawguard-server <command> [flags]

commands:
  serve     serve the Guard, Approvals and Registry gRPC services
  migrate   apply database migrations and exit
  version   print the version (also --version)

Every flag has a CLAWGUARD_* environment twin (--database-url → CLAWGUARD_DATABASE_URL).
Run "clawguard-server <command> --help" for a command's flags.
`

var version = "dev"

// serveGCPercent is the GC target of `serve` when GOGC is not set.
const serveGCPercent = 400

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stderr)
	case "migrate":
		return migrate(ctx, args[1:], stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, version)
		return 0
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "clawguard-server: unknown command %q\n%s", args[0], usage)
	return 2
}

func serve(ctx context.Context, args []string, stderr io.Writer) int {
	cfg := config.Default()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg.Bind(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := flagfile.Apply(fs, cfg.ConfigFile, config.FromEnv); err != nil {
		fmt.Fprintf(stderr, "clawguard-server: %v\n", err)
		return 2
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "clawguard-server: %v\n", err)
		return 2
	}
	if _, set := os.LookupEnv("GOGC"); !set {
		// The live heap is small and every decision allocates short-lived
		// gRPC/pgx garbage. Each collection also shrinks the idle gRPC
		// workers' stacks, which the next deep interceptor and validation
		// chain grows again: collecting less often buys CPU per decision
		// for some heap (BENCHMARKS.md, "Figures behind code choices"). An
		// operator's GOGC still wins.
		debug.SetGCPercent(serveGCPercent)
	}
	log := newLogger(cfg)
	log.Info("starting clawguard-server", "version", version, "config", cfg)
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	app.Version = version
	srv, err := app.New(startCtx, cfg, log)
	cancel()
	if err != nil {
		log.Error("could not start", "err", err) // JSON like every other line, secrets redacted
		return 1
	}
	log.Info("serving", "grpc", srv.Addr(), "metrics", srv.MetricsAddr())
	if err := srv.Run(ctx); err != nil {
		log.Error("stopped on error", "err", err)
		return 1
	}
	log.Info("stopped")
	return 0
}

func migrate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg := config.Default()
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg.BindDatabase(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := config.ValidateDatabaseURL(cfg.DatabaseURL); err != nil {
		fmt.Fprintf(stderr, "clawguard-server: %v\n", err)
		return 2
	}
	st, err := store.Open(ctx, cfg.DatabaseURL, 2)
	if err != nil {
		fmt.Fprintf(stderr, "clawguard-server: %v\n", err)
		return 1
	}
	defer st.Close()
	res, err := migrations.Apply(ctx, st.Pool, 0)
	if err != nil {
		if errors.Is(err, migrations.ErrDatabaseNewer) {
			fmt.Fprintf(stderr, "clawguard-server: %v (upgrade this binary)\n", err)
		} else {
			fmt.Fprintf(stderr, "clawguard-server: %v\n", err)
		}
		return 1
	}
	if len(res.Applied) == 0 {
		fmt.Fprintf(stdout, "schema is current (version %d); nothing to do\n", res.To)
		return 0
	}
	for _, m := range res.Applied {
		fmt.Fprintf(stdout, "applied %04d_%s\n", m.Version, m.Name)
	}
	fmt.Fprintf(stdout, "schema migrated from version %d to %d\n", res.From, res.To)
	return 0
}

// newLogger is the one logger of the process (also slog's and the log
// package's default, so no line prints in another format), redacting the
// database and webhook URLs' secrets wherever they appear.
func newLogger(cfg config.Config) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(cfg.LogLevel))
	log := logs.New(os.Stderr, l, append(logs.URLSecrets(cfg.DatabaseURL), logs.URLSecrets(cfg.WebhookURL)...)...)
	slog.SetDefault(log)
	return log
}
