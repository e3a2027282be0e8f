package mcpface

import (
	"context"
	"io"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
)

// BenchmarkStdioRoundTrip: one tools/call of a delivery action from an MCP
// client over a pair of pipes (what stdio is) through clawguard-mcp to a
// gateway on a unix socket and back; the gateway answers at once, so this
// is clawguard-mcp's own cost plus the two transports.
func BenchmarkStdioRoundTrip(b *testing.B) {
	gw := newScripted()
	gw.answer = func(*agentv1.SendRequest) *agentv1.SendResponse {
		return &agentv1.SendResponse{Status: agentv1.SendStatus_SEND_STATUS_DONE, Reason: "queued"}
	}
	conn := dialScripted(b, gw)
	f := New(Config{Gateway: agentv1.NewAgentGatewayClient(conn), QueuePath: filepath.Join(b.TempDir(), "inbox.jsonl")})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sr, cw := io.Pipe()
	cr, sw := io.Pipe()
	go f.Run(ctx, &mcp.IOTransport{Reader: sr, Writer: sw})
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(ctx, &mcp.IOTransport{Reader: cr, Writer: cw}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	args := map[string]any{"text": "hello"}
	b.ResetTimer()
	for b.Loop() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "reply", Arguments: args})
		if err != nil || res.IsError {
			b.Fatalf("call: %v %v", res, err)
		}
	}
}
