package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// The seed writes create_agent's instructions into the new group so its
// agent starts with them. Here: a confined group's create_agent is held,
// approved and replayed; the new group keeps the instructions, and the
// first session of it (opened by a message from its parent) starts with
// them in its workspace.
func TestCreateAgentInstructionsReachTheNewAgentsFirstSession(t *testing.T) {
	s := startServer(t)
	owner := s.owner(t, "telegram:olivia")
	parent := s.group(t, "parent", guardv1.CliScope_CLI_SCOPE_GROUP)
	const instructions = "You watch the build logs.\nReport failures to parent."
	r := s.startRunner(t, runnerOpts{groups: []string{parent}, script: []any{
		step("create_agent", map[string]any{"name": "scout", "instructions": instructions}),
	}})
	sp := r.session(t, parent)
	held := waitEvent(t, sp, "create_agent held", notice("HELD"))
	hold, err := s.op.approvals.Get(context.Background(), &guardv1.GetRequest{Id: held.s("hold_id")})
	if err != nil {
		t.Fatal(err)
	}
	if got := hold.GetHold().GetPayload().GetFields()["instructions"].GetStringValue(); got != instructions {
		t.Fatalf("held payload instructions = %q", got)
	}
	s.approve(t, held.s("hold_id"), owner)
	waitEvent(t, sp, "replayed create_agent's result", notice("RESULT"))

	// The new group carries the instructions.
	var child *guardv1.Group
	waitFor(t, 30*time.Second, "group scout", func() bool {
		gs, err := s.op.registry.ListGroups(context.Background(), &guardv1.ListGroupsRequest{})
		if err != nil {
			return false
		}
		for _, g := range gs.GetGroups() {
			if g.GetName() == "scout" {
				child = g
			}
		}
		return child != nil
	})
	if child.GetInstructions() != instructions {
		t.Fatalf("group scout instructions = %q, want %q", child.GetInstructions(), instructions)
	}

	// Its first session starts with them.
	do(sp, "hello", step("send_message", map[string]any{"to": child.GetId(), "text": "hello scout"}))
	sc := r.session(t, child.GetId())
	start := waitEvent(t, sc, "scout's agent started", func(e event) bool { return e.s("type") == "start" })
	if start.s("instructions") != instructions {
		b, _ := json.Marshal(start)
		t.Fatalf("scout's agent started with %s, want its instructions", b)
	}
	waitEvent(t, sc, "the parent's message", func(e event) bool { return e.s("type") == "message" && e.s("text") == "hello scout" })
}
