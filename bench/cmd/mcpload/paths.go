package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/mcpcall"
)

// The paths: the same read_file of the same file, i is the call's number
// (its session is i mod sessions).

var readArgs = map[string]any{"path": "f.txt"}

// direct is the server called on its own stdio.
func (w *world) direct(i int) error {
	return toolResult(w.directs[i%len(w.directs)].CallTool(context.Background(), &mcp.CallToolParams{Name: "read_file", Arguments: readArgs}))
}

// host is an MCP host calling the tool through clawguard-mcp.
func (w *world) host(i int) error {
	return toolResult(w.hosts[i%len(w.hosts)].CallTool(context.Background(), &mcp.CallToolParams{Name: "fs__read_file", Arguments: readArgs}))
}

func toolResult(r *mcp.CallToolResult, err error) error {
	if err != nil {
		return err
	}
	if r.IsError {
		return fmt.Errorf("read_file: tool error: %v", r.Content)
	}
	return nil
}

var sent atomic.Int64

// gateway is the session's gateway's Send, as clawguard-mcp sends it.
func (w *world) gateway(i int) error {
	p, _ := structpb.NewStruct(map[string]any{"server": "fs", "tool": "read_file", "arguments": readArgs})
	r, err := w.gws[i%len(w.gws)].Send(context.Background(), &agentv1.SendRequest{RequestId: fmt.Sprintf("c%d", sent.Add(1)), Action: "mcp_call", Payload: p})
	if err != nil {
		return err
	}
	if r.GetStatus() != agentv1.SendStatus_SEND_STATUS_DONE || r.GetResult().GetFields()["isError"].GetBoolValue() {
		return fmt.Errorf("mcp_call: %v %s", r.GetStatus(), r.GetReason())
	}
	return nil
}

// decide is the decision alone: Guard.Decide of the same mcp.call, as the
// runner asks it (its token, the session asserted).
func (w *world) decide(i int) error {
	digest, err := mcpcall.Digest("fs", "read_file", readArgs)
	if err != nil {
		return err
	}
	p, _ := structpb.NewStruct(map[string]any{"server": "fs", "tool": "read_file", "arguments": readArgs})
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-clawguard-session", w.sessions[i%len(w.sessions)])
	r, err := w.guard.Decide(ctx, &guardv1.DecideRequest{Action: mcpcall.CatalogAction, Resource: mcpcall.Resource("fs", "read_file", digest), Payload: p})
	if err != nil {
		return err
	}
	if r.GetDecision().GetEffect() != guardv1.Effect_EFFECT_ALLOW {
		return errors.New("decide: " + r.GetDecision().String())
	}
	return nil
}
