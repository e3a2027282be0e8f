package app

import (
	"context"

	"github.com/clawguard/clawguard/server/internal/api"
	"github.com/clawguard/clawguard/server/internal/chatout"
)

// Chat outbox: agent replies and notices for chats, followed by bridges.
func init() {
	wirings = append(wirings, func(_ context.Context, d *api.Deps, _ *services) error {
		d.ChatOut = chatout.New(d.Store.Pool)
		return nil
	})
}
