package resources

import (
	"maps"
	"slices"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// applyAgentSettings applies an update's agent command and environment to
// c and reports whether they changed (the group's agents restart with
// them). An empty value removes a variable; an empty command goes back to
// the image's.
func applyAgentSettings(c *GroupConfig, req *guardv1.UpdateGroupConfigRequest) bool {
	changed := false
	if req.AgentCommand != nil {
		args := req.GetAgentCommand().GetArgs()
		if args == nil {
			args = []string{}
		}
		if !slices.Equal(args, c.AgentCommand) {
			c.AgentCommand, changed = args, true
		}
	}
	if len(req.GetAgentEnv()) > 0 {
		env := maps.Clone(c.AgentEnv)
		if env == nil {
			env = map[string]string{}
		}
		for k, v := range req.GetAgentEnv() {
			if v == "" {
				delete(env, k)
			} else {
				env[k] = v
			}
		}
		if !maps.Equal(env, c.AgentEnv) {
			c.AgentEnv, changed = env, true
		}
	}
	return changed
}
