package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// wireProxy sits between a runner and its server and records every message
// that crosses: which RPC, which way, and its bytes. It forwards frames as
// they are (a codec that does not decode), so what it counts is what the
// runner and the server put on the wire.
type wireProxy struct {
	addr string

	mu    sync.Mutex
	calls []string // methods, one per RPC opened
	msgs  []wireMsg
}

type wireMsg struct {
	method string
	up     bool // runner → server
	data   []byte
}

// rawCodec hands frames on without decoding them.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = bytes.Clone(data)
	return nil
}
func (rawCodec) Name() string { return "proto" }

func startWireProxy(t *testing.T, target string) *wireProxy {
	t.Helper()
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &wireProxy{addr: ln.Addr().String()}
	srv := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
		return p.forward(conn, ss)
	}))
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return p
}

// forward relays one RPC, both ways, recording each frame.
func (p *wireProxy) forward(conn *grpc.ClientConn, ss grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(ss)
	p.mu.Lock()
	p.calls = append(p.calls, method)
	p.mu.Unlock()
	md, _ := metadata.FromIncomingContext(ss.Context())
	md = md.Copy()
	delete(md, ":authority")
	delete(md, "content-type")
	ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(ss.Context(), md))
	defer cancel()
	cs, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method, grpc.ForceCodec(rawCodec{}))
	if err != nil {
		return err
	}
	go func() {
		for {
			var b []byte
			if err := ss.RecvMsg(&b); err != nil {
				_ = cs.CloseSend()
				return
			}
			p.record(method, true, b)
			if err := cs.SendMsg(&b); err != nil {
				return
			}
		}
	}()
	if hdr, err := cs.Header(); err == nil {
		_ = ss.SendHeader(hdr)
	}
	for {
		var b []byte
		err := cs.RecvMsg(&b)
		if errors.Is(err, io.EOF) {
			ss.SetTrailer(cs.Trailer())
			return nil
		}
		if err != nil {
			ss.SetTrailer(cs.Trailer())
			return err
		}
		p.record(method, false, b)
		if err := ss.SendMsg(&b); err != nil {
			return err
		}
	}
}

func (p *wireProxy) record(method string, up bool, b []byte) {
	p.mu.Lock()
	p.msgs = append(p.msgs, wireMsg{method: method, up: up, data: b})
	p.mu.Unlock()
}

// reset forgets what crossed so far.
func (p *wireProxy) reset() {
	p.mu.Lock()
	p.calls, p.msgs = nil, nil
	p.mu.Unlock()
}

// wireCount is what one piece of work cost on the wire.
type wireCount struct {
	// roundTrips are the runner's requests that wait for the server's
	// answer: a unary RPC, a DecideStream frame. The Connect stream's
	// heartbeats and acks are not counted (they are not the work's).
	roundTrips []string
	// pushes are the server's Connect frames that name the work.
	pushes int
	// payload is how many frames carry its payload (by a marker in it).
	payload int
}

func (c wireCount) String() string {
	sort.Strings(c.roundTrips)
	return fmt.Sprintf("%d push(es), %d round trip(s) from the runner %v, the payload in %d frame(s)",
		c.pushes, len(c.roundTrips), c.roundTrips, c.payload)
}

const (
	decideStream = "/guard.v1.Guard/DecideStream"
	connect      = "/guard.v1.Registry/Connect"
)

// count reads what crossed since the last reset: frames naming id are the
// work's, frames holding marker carry its payload.
func (p *wireProxy) count(id, marker string) wireCount {
	p.mu.Lock()
	defer p.mu.Unlock()
	var c wireCount
	for _, m := range p.calls {
		if m != decideStream && m != connect && !strings.HasSuffix(m, "/WatchChatOutbox") {
			c.roundTrips = append(c.roundTrips, strings.TrimPrefix(m, "/guard.v1."))
		}
	}
	for _, m := range p.msgs {
		if bytes.Contains(m.data, []byte(marker)) {
			c.payload++
		}
		switch {
		case m.method == decideStream && m.up:
			c.roundTrips = append(c.roundTrips, "Guard/DecideStream frame")
		case m.method == connect && !m.up && bytes.Contains(m.data, []byte(id)):
			c.pushes++
		}
	}
	return c
}

// TestAnApprovedCallCrossesTheWireOnce counts, on the wire between runner
// and server, what one approved MCP tool call costs from the approval to
// its result in the agent's inbox: the server's push, then one round trip
// that decides and claims the hold the server already holds, and the
// payload carried once (by the push).
func TestAnApprovedCallCrossesTheWireOnce(t *testing.T) {
	s := startServer(t)
	px := startWireProxy(t, s.addr)
	w := newMCPWorldOn(t, s, "process", runnerOpts{serverAddr: px.addr})
	marker := "payload-marker-" + w.group
	held := w.call(t, "write_file", map[string]any{"path": "m.txt", "content": marker})
	if held.GetHoldId() == "" {
		t.Fatalf("want HELD: %v", held)
	}
	px.reset()
	w.s.approve(t, held.GetHoldId(), "telegram:1")
	waitEvent(t, w.sess, "the approved call's result", func(e event) bool {
		return e.s("kind") == "RESULT" && e.s("hold_id") == held.GetHoldId()
	})
	c := px.count(held.GetHoldId(), marker)
	t.Logf("one approved mcp_call, approval to result: %s", c)
	if c.pushes != 1 || len(c.roundTrips) != 1 || c.payload != 1 {
		t.Fatalf("an approved call cost %s; want its push, one round trip and the payload once", c)
	}
}

// Issue 42: every ListTools of an agent read the session's config and
// reported every server's tools, so an agent's read was writes on the
// server. It is answered from what the runner knows; the server hears a
// server's tools again only when they, or its settings, changed.
func TestListToolsIsAnsweredFromWhatTheRunnerKnows(t *testing.T) {
	s := startServer(t)
	px := startWireProxy(t, s.addr)
	w := newMCPWorldOn(t, s, "process", runnerOpts{serverAddr: px.addr})
	if tl := w.tools(t)["fs/read_file"]; tl == nil || tl.GetEffect() != "" {
		t.Fatalf("first listing: read_file = %v", tl)
	}
	px.reset()
	for range 3 {
		if tl := w.tools(t)["fs/read_file"]; tl == nil {
			t.Fatal("read_file not listed")
		}
	}
	if c := px.count("-", "-"); len(c.roundTrips) != 0 {
		t.Fatalf("three listings of unchanged tools cost %s; want nothing asked of the server", c)
	}
	// The operator's setting changes the effect; the server tells the
	// session (TOOLS_CHANGED), and the next listing asks once.
	w.set(t, "read_file", guardv1.Effect_EFFECT_ALLOW, 0, 0)
	waitEvent(t, w.sess, "TOOLS_CHANGED from the setting", func(e event) bool { return e.s("kind") == "TOOLS_CHANGED" })
	px.reset()
	if tl := w.tools(t)["fs/read_file"]; tl.GetEffect() != "allow" {
		t.Fatalf("after the setting: read_file = %v, want allow", tl)
	}
	if c := px.count("-", "-"); len(c.roundTrips) != 1 || c.roundTrips[0] != "Registry/ReportMcpTools" {
		t.Fatalf("the listing after a settings change cost %s; want one ReportMcpTools", c)
	}
}
