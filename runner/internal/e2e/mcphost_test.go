package e2e

import (
	"strings"
	"testing"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Issue 42: an MCP host calls an allowed guarded tool through
// clawguard-mcp, and what the runner asks of the server is the decision
// alone — one DecideStream frame. The tool's result comes back as the MCP
// server gave it (passed on as JSON, not made a Struct and back).
func TestAnAllowedToolCallFromAnMCPHostIsTheDecisionAlone(t *testing.T) {
	s := startServer(t)
	px := startWireProxy(t, s.addr)
	w := newMCPWorldOn(t, s, "process", runnerOpts{serverAddr: px.addr})
	w.set(t, "read_file", guardv1.Effect_EFFECT_ALLOW, 0, 0)
	w.set(t, "write_file", guardv1.Effect_EFFECT_ALLOW, 0, 0)
	h := startMCP(t, mcpOn(w.sess))
	if res := h.call(t, "fs__write_file", map[string]any{"path": "h.txt", "content": "through the host"}); res.IsError {
		t.Fatalf("write_file: %v", toolText(res))
	}
	px.reset()
	res := h.call(t, "fs__read_file", map[string]any{"path": "h.txt"})
	if res.IsError || toolText(res) != "through the host" {
		t.Fatalf("read_file through clawguard-mcp: %q (error %v)", toolText(res), res.IsError)
	}
	if c := px.count("-", "-"); len(c.roundTrips) != 1 || !strings.HasPrefix(c.roundTrips[0], "Guard/DecideStream") {
		t.Fatalf("an allowed call cost %s; want one decision", c)
	}
}
