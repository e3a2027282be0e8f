// Command clawguard-telegram is the reference Telegram bridge: approvals,
// unknown senders and new chats approved from Telegram, agent replies
// delivered back. See cli/README.md.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/clawguard/clawguard/cli/internal/telegram"
)

func main() {
	cfg, err := telegram.Parse(os.Args[1:], os.LookupEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "clawguard-telegram:", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: telegram.LogLevel(cfg.LogLevel)}))
	slog.SetDefault(log) // the standard logger's lines (grpc, libraries) as JSON too
	conn, err := telegram.Dial(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "clawguard-telegram:", err)
		os.Exit(2)
	}
	defer conn.Close()
	b, err := telegram.New(cfg, conn, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "clawguard-telegram:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := b.Run(ctx); err != nil {
		log.Error("clawguard-telegram failed", "err", err)
		os.Exit(1)
	}
}
