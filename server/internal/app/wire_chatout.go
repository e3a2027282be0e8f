package app

import (
	"github.com/clawguard/clawguard/server/internal/chatout"
)

// Chat outbox: agent replies and notices for chats, followed by bridges.
func wireChatOut(d *Parts) {
	d.ChatOut = chatout.New(d.Store.Pool)
}
