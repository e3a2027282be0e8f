package mcpface

import (
	"fmt"
	"strings"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
)

// contextWords tell the model who it is and whom it may message: its group
// and session, and each destination by the name send_message takes.
func contextWords(c *agentv1.AgentContext) string {
	var b strings.Builder
	group := c.GetGroupId()
	if n := c.GetGroupName(); n != "" {
		group = fmt.Sprintf("%s (%s)", n, c.GetGroupId())
	}
	fmt.Fprintf(&b, "You are the agent of group %s, session %s.", group, c.GetSessionId())
	if len(c.GetDestinations()) == 0 {
		b.WriteString(" You have no destinations: send_message can reach no other group until an operator adds one (ncl destinations add).")
		return b.String()
	}
	b.WriteString(` You may message these groups with send_message, "to" being the name:`)
	for _, d := range c.GetDestinations() {
		fmt.Fprintf(&b, "\n- %s: group %s (%s)", d.GetName(), orID(d.GetGroupName(), d.GetGroupId()), d.GetGroupId())
	}
	return b.String()
}

func orID(name, id string) string {
	if name == "" {
		return id
	}
	return name
}
