package mcpface

import (
	"strings"
	"testing"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
)

// The instructions the host reads at initialize name the agent's group and
// its destinations by the names send_message takes.
func TestInstructionsNameTheGroupAndItsDestinations(t *testing.T) {
	gw := newScripted()
	gw.context = &agentv1.AgentContext{SessionId: "sess_1", GroupId: "ag_1", GroupName: "research",
		Destinations: []*agentv1.AgentDestination{{Name: "ops", GroupId: "ag_2", GroupName: "operations"}}}
	h := serve(t, gw, "")
	instr := h.cs.InitializeResult().Instructions
	for _, want := range []string{"Clawguard guards", "group research (ag_1), session sess_1", `"to" being the name`, "- ops: group operations (ag_2)"} {
		if !strings.Contains(instr, want) {
			t.Errorf("instructions lack %q:\n%s", want, instr)
		}
	}
	lone := newScripted()
	lone.context = &agentv1.AgentContext{SessionId: "sess_2", GroupId: "ag_3"}
	if instr := serve(t, lone, "").cs.InitializeResult().Instructions; !strings.Contains(instr, "no destinations") {
		t.Errorf("a group without destinations: %s", instr)
	}
}
