// Command clawguard-init is the first process of every agent container the
// runner starts: it opens the agent's way out on the container's loopback
// (a forwarder to the runner's egress socket: HTTPS_PROXY, HTTP_PROXY and
// the model base URLs point at it), then runs the agent's command, passes
// the signals it gets on to it, reaps every orphan (it is PID 1), and exits
// with the agent's status.
//
//	clawguard-init -- AGENT-COMMAND [ARGS...]
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/clawguard/clawguard/runner/internal/forward"
)

// version is set at build time (-X main.version=...).
var version = "dev"

// Where the runner mounts the egress socket, and where the agent finds it.
const (
	defaultSocket = "/run/clawguard/egress.sock"
	defaultListen = "127.0.0.1:3128"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("program", "clawguard-init")
	args := os.Args[1:]
	if len(args) == 1 && args[0] == "--version" {
		fmt.Println(version)
		return
	}
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: clawguard-init -- AGENT-COMMAND [ARGS...]")
		os.Exit(2)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := openWayOut(ctx, log, envOr("CLAWGUARD_EGRESS_SOCKET", defaultSocket), envOr("CLAWGUARD_EGRESS_LISTEN", defaultListen)); err != nil {
		log.Error("the agent's way out could not be opened", "err", err)
		os.Exit(1)
	}
	os.Exit(run(log, args))
}

// openWayOut listens on the loopback address before the agent starts, so
// its first connection finds the forwarder. No socket mounted: no way out
// (the agent runs with none, as every container did before egress).
func openWayOut(ctx context.Context, log *slog.Logger, socket, listen string) error {
	if fi, err := os.Stat(socket); err != nil || fi.Mode()&os.ModeSocket == 0 {
		log.Info("no egress socket; the agent has no way out", "socket", socket)
		return nil
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", listen, err)
	}
	go (&forward.Forwarder{Listener: ln, Socket: socket, Log: log}).Serve(ctx)
	return nil
}

// run starts the agent and waits for it, passing signals on and reaping
// the orphans the agent leaves (as PID 1 every orphan in the container
// becomes ours). It returns the agent's exit status (128+signal when a
// signal ended it).
func run(log *slog.Logger, args []string) int {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH)
	if err := cmd.Start(); err != nil {
		log.Error("the agent could not be started", "command", args[0], "err", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return 127
		}
		return 126
	}
	child := cmd.Process.Pid
	go func() {
		for s := range sigs {
			syscall.Kill(child, s.(syscall.Signal))
		}
	}()
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			log.Error("waiting for the agent failed", "err", err)
			return 1
		}
		if pid != child {
			continue // an orphan, reaped
		}
		if ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ws.ExitStatus()
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
