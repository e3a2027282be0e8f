// Package mcpface is clawguard-mcp, the agent's MCP server: a stdio MCP
// server inside the agent's container that speaks to the runner only
// through the session's gateway socket (agent.v1.AgentGateway).
//
// It offers every delivery action of the runner (ListActions) as a tool
// whose input schema is the one the runner validates the payload with, and
// every guarded MCP tool the session may call (ListTools) as
// <server>__<tool>, called as the delivery action mcp_call. A tool call is
// one Send: its answer (done, held, denied, failed) is the tool's result at
// once; a held call's outcome comes later through the inbox. The inbox
// (messages, notices, results of approved calls) is offered as the tools
// read_inbox and wait_for_messages, and announced as an update of the
// subscribable resource inbox://pending plus a log message, for hosts that
// act on notifications.
//
// Inbox delivery is acknowledged: each item from the runner is appended to
// clawguard-mcp's own queue on disk (queue.go, in the session's workspace)
// and then acknowledged, so the runner forgets it; the model's read marks
// it read in the queue. An item reaches the model once whatever restarts:
// one the runner sends again (a lost ack, a runner restart) is recognised
// by its item_id, and one not yet read is shown by the next clawguard-mcp.
package mcpface

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
)

// Names clawguard-mcp gives its own things.
const (
	ReadInbox       = "read_inbox"
	WaitForMessages = "wait_for_messages"
	InboxURI        = "inbox://pending"
	// MCPCall is the delivery action a guarded MCP tool is called through;
	// it is offered per tool, not as a tool of its own.
	MCPCall = "mcp_call"
)

// Config is what a Face needs.
type Config struct {
	// Gateway is the session's agent gateway (the runner's unix socket).
	Gateway agentv1.AgentGatewayClient
	// QueuePath is clawguard-mcp's own inbox queue (required): a file in
	// the session's workspace, which outlives clawguard-mcp and the
	// container.
	QueuePath string
	// QueueMax and QueueMaxBytes bound the unread items in the queue
	// (defaults DefaultQueueMax, DefaultQueueMaxBytes). A full queue takes
	// no more until the model reads: the runner keeps them meanwhile.
	QueueMax, QueueMaxBytes int
	// Acker acknowledges inbox items once they are in the queue (nil: the
	// gateway's Ack).
	Acker Acker
	// CallWait bounds how long a tool call waits for the gateway's answer
	// before it answers "no answer yet" (default 30s). A held call answers
	// at once whatever this is.
	CallWait time.Duration
	// MaxWait bounds wait_for_messages (default 5m).
	MaxWait time.Duration
	// Version is reported to the host.
	Version string
	Log     *slog.Logger
}

// Face is one clawguard-mcp server.
type Face struct {
	cfg    Config
	server *mcp.Server
	inbox  *inbox
	acks   *acks
	log    *slog.Logger
	prefix string
	seq    atomic.Uint64

	refreshMu sync.Mutex
	retrying  atomic.Bool
	offered   map[string]offeredTool
	told      map[string]bool // refusals already told to the model
}

type offeredTool struct {
	digest  string // of its definition: an unchanged tool is not added again
	guarded bool   // a guarded MCP server's tool (not a delivery action)
}

// New builds the server; Run serves it.
func New(cfg Config) *Face {
	if cfg.Acker == nil {
		gw := cfg.Gateway
		cfg.Acker = AckFunc(func(ctx context.Context, ids []string) error {
			_, err := gw.Ack(ctx, &agentv1.AckRequest{ItemIds: ids}, grpc.WaitForReady(true))
			return err
		})
	}
	if cfg.CallWait <= 0 {
		cfg.CallWait = 30 * time.Second
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 5 * time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	f := &Face{cfg: cfg, log: cfg.Log, prefix: "mcp-" + hex.EncodeToString(b) + "-",
		offered: map[string]offeredTool{}, told: map[string]bool{}}
	f.inbox = newInbox(f.announce)
	f.acks = newAcks(cfg.Acker, cfg.Log)
	// The SDK's own log (every notification sent) is noise on stderr.
	sdkLog := slog.New(slog.DiscardHandler)
	f.server = mcp.NewServer(&mcp.Implementation{Name: "clawguard", Title: "Clawguard", Version: cfg.Version}, &mcp.ServerOptions{
		Instructions: instructions,
		Logger:       sdkLog,
		Capabilities: &mcp.ServerCapabilities{
			Tools:     &mcp.ToolCapabilities{ListChanged: true},
			Resources: &mcp.ResourceCapabilities{Subscribe: true},
			Logging:   &mcp.LoggingCapabilities{},
		},
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			if req.Params.URI != InboxURI {
				return fmt.Errorf("no resource %q to subscribe to (only %s)", req.Params.URI, InboxURI)
			}
			return nil
		},
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	f.server.AddResource(&mcp.Resource{URI: InboxURI, Name: "inbox", MIMEType: "application/json",
		Description: "Inbox items not yet read: messages for you and outcomes of your held actions. Reading it does not mark them read; read_inbox does."},
		f.readResource)
	f.server.AddTool(&mcp.Tool{Name: ReadInbox, Description: "Return and mark read every inbox item waiting: messages from people and other agents, and the outcomes of your held actions (approved and run, with the result; rejected; denied).",
		InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)}, f.readInbox)
	f.server.AddTool(&mcp.Tool{Name: WaitForMessages, Description: fmt.Sprintf("Wait until an inbox item arrives (or timeout_seconds pass, at most %d), then return and mark read what is waiting. Use it to wait for the outcome of a held action.", int(cfg.MaxWait/time.Second)),
		InputSchema: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"timeout_seconds":{"type":"number","minimum":0,"maximum":%d,"description":"How long to wait (default 60)"}}}`, int(cfg.MaxWait/time.Second)))},
		f.waitForMessages)
	return f
}

const instructions = `Clawguard guards this agent's privileged actions. Each tool here (besides read_inbox and wait_for_messages) is an action the runner performs only after asking the guard: it runs at once (done), is denied (with the reason), or is held for a human's approval. A held call answers at once with the hold id and who may approve it; do not send it again: its outcome (with the result, once approved and run) arrives later in your inbox. Read the inbox with read_inbox, or call wait_for_messages to wait for it; messages from people and other agents arrive there too.`

// Server is the MCP server (to Run on a transport, or for tests).
func (f *Face) Server() *mcp.Server { return f.server }

var builtins = map[string]bool{ReadInbox: true, WaitForMessages: true}

// Run opens the inbox queue, loads the tools, follows the inbox and serves
// t until ctx ends or the host hangs up. A queue that cannot be opened is
// an error (nothing could be acknowledged safely); one another
// clawguard-mcp holds leaves this one serving tools only until it can
// take the queue over.
func (f *Face) Run(ctx context.Context, t mcp.Transport) error {
	if f.cfg.QueuePath == "" {
		return errors.New("clawguard-mcp: no inbox queue path")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	q, unread, err := openQueue(f.cfg.QueuePath, f.cfg.QueueMax, f.cfg.QueueMaxBytes)
	switch {
	case errors.Is(err, errQueueLocked):
		f.log.Warn("clawguard-mcp: " + err.Error() + "; serving tools only until it exits")
		f.inbox.local("Another clawguard-mcp of this session reads the inbox (messages and outcomes reach it, not this one) until it exits.")
		go f.takeOverQueue(ctx)
	case err != nil:
		return err
	default:
		f.inbox.open(q, unread)
	}
	defer f.inbox.close()
	// Tools first, so the first tools/list is whole: many hosts never ask
	// again. A runner that cannot be reached yet gets its tools offered
	// when the inbox stream reaches it (list_changed).
	lctx, lcancel := context.WithTimeout(ctx, 15*time.Second)
	err = f.Refresh(lctx)
	lcancel()
	if err != nil {
		f.log.Warn("clawguard-mcp: tools not loaded yet; trying again", "err", err)
		go f.refreshUntilLoaded(ctx)
	}
	if q != nil {
		go f.acks.run(ctx)
		go f.followInbox(ctx)
	}
	return f.server.Run(ctx, t)
}
