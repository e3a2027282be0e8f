package bridge

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"google.golang.org/grpc"
)

// Runner is a built bridge.
type Runner interface {
	Run(ctx context.Context) error
}

// Build makes a bridge over the connection to the control plane.
type Build func(conn *grpc.ClientConn, log *slog.Logger) (Runner, error)

// Setup reads a bridge's config from its arguments and environment and
// says how to build it.
type Setup func(args []string, getenv func(string) (string, bool)) (Config, Build, error)

// Main is a bridge binary's main: "--version" prints version; otherwise
// the config is read (exit 2 when it is wrong), logs are JSON on stderr,
// and the bridge runs until SIGINT or SIGTERM (exit 1 when it fails).
func Main(program, version string, setup Setup) {
	if len(os.Args) == 2 && (os.Args[1] == "--version" || os.Args[1] == "version") {
		fmt.Println(version)
		return
	}
	cfg, build, err := setup(os.Args[1:], os.LookupEnv)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, program+":", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: LogLevel(cfg.LogLevel)}))
	slog.SetDefault(log) // the standard logger's lines (grpc, libraries) as JSON too
	conn, err := Dial(cfg, program+"/"+version)
	if err != nil {
		fmt.Fprintln(os.Stderr, program+":", err)
		os.Exit(2)
	}
	defer conn.Close()
	b, err := build(conn, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, program+":", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := b.Run(ctx); err != nil {
		log.Error(program+" failed", "err", err)
		stop()
		conn.Close()
		os.Exit(1)
	}
}
