// Command clawguard-mcp is the agent's MCP server: run by the agent's MCP
// host (Claude Code, any MCP client) over stdio inside the agent's
// container, it offers the runner's delivery actions and guarded MCP tools
// as MCP tools and the session's inbox as tools and notifications. It talks
// to the runner only over the session's gateway socket
// ($CLAWGUARD_GATEWAY_SOCKET, /run/clawguard/gateway.sock in a container).
// It keeps the inbox items it has taken from the runner, until the model
// reads them, in a queue file in the session's workspace
// ($CLAWGUARD_WORKSPACE/.clawguard-mcp/inbox.jsonl), which outlives it and
// the container.
//
//	claude mcp add clawguard -- /usr/local/bin/clawguard-mcp
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
	"github.com/clawguard/clawguard/runner/internal/mcpface"
)

// version is set at build time (-X main.version=...).
var version = "dev"

// defaultSocket is where the gateway socket is mounted in an agent container.
const defaultSocket = "/run/clawguard/gateway.sock"

func main() {
	socket := flag.String("socket", envOr("CLAWGUARD_GATEWAY_SOCKET", defaultSocket), "the session's agent gateway socket (env CLAWGUARD_GATEWAY_SOCKET)")
	callWait := flag.Duration("call-wait", 30*time.Second, "how long a tool call waits for the runner before answering that its outcome will come through the inbox")
	maxWait := flag.Duration("max-wait", 5*time.Minute, "the longest wait_for_messages may wait")
	queue := flag.String("inbox-queue", defaultQueue(), "the file keeping inbox items taken from the runner until the model reads them, one clawguard-mcp per file; in the session's workspace, $CLAWGUARD_WORKSPACE/"+queueName+", unless set")
	queueMax := flag.Int("inbox-queue-max", mcpface.DefaultQueueMax, "unread items the queue holds at most; when full, the runner keeps the rest until the model reads")
	logLevel := flag.String("log-level", "warn", "stderr log level: debug, info, warn, error")
	showVersion := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *showVersion {
		fmt.Println(version)
		return
	}
	if flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "clawguard-mcp: no arguments expected; it speaks MCP on stdin/stdout")
		os.Exit(2)
	}
	if *queue == "" {
		fmt.Fprintln(os.Stderr, "clawguard-mcp: no inbox queue: set --inbox-queue, or CLAWGUARD_WORKSPACE (the runner sets it in every session)")
		os.Exit(2)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintln(os.Stderr, "clawguard-mcp: --log-level:", err)
		os.Exit(2)
	}
	// stdout is the MCP stream: every log line goes to stderr.
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := mcpface.Config{CallWait: *callWait, MaxWait: *maxWait, QueuePath: *queue, QueueMax: *queueMax, Version: version, Log: log}
	if err := run(ctx, *socket, cfg); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "clawguard-mcp:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, socket string, cfg mcpface.Config) error {
	if err := checkSocket(socket); err != nil {
		return err
	}
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("gateway %s: %w", socket, err)
	}
	defer conn.Close()
	cfg.Gateway = agentv1.NewAgentGatewayClient(conn)
	return mcpface.New(cfg).Run(ctx, &mcp.StdioTransport{})
}

// checkSocket refuses, at once and in words, a gateway socket that cannot
// be this session's: a relative path (a host's working directory is not
// the agent's) or one that is not there.
func checkSocket(socket string) error {
	if !filepath.IsAbs(socket) {
		return fmt.Errorf("--socket %q is not an absolute path: give the session's gateway socket as the runner set it ($CLAWGUARD_GATEWAY_SOCKET; %s in an agent's container)", socket, defaultSocket)
	}
	fi, err := os.Stat(socket)
	switch {
	case err != nil:
		return fmt.Errorf("no gateway socket at %s (%v): run clawguard-mcp in the agent's session, where the runner mounts it ($CLAWGUARD_GATEWAY_SOCKET)", socket, err)
	case fi.Mode()&os.ModeSocket == 0:
		return fmt.Errorf("%s is not a unix socket (mode %s): give the session's gateway socket ($CLAWGUARD_GATEWAY_SOCKET)", socket, fi.Mode())
	}
	return nil
}

// queueName is the queue's place in the workspace.
const queueName = ".clawguard-mcp/inbox.jsonl"

// defaultQueue is the queue in the session's workspace (mounted from the
// runner's session directory: writable by the agent, kept across
// restarts of clawguard-mcp and of the container), "" outside a session.
func defaultQueue() string {
	if ws := os.Getenv("CLAWGUARD_WORKSPACE"); ws != "" {
		return filepath.Join(ws, queueName)
	}
	return ""
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
