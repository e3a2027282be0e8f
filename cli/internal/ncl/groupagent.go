package ncl

import (
	"encoding/json"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// agentSettings reads --agent-command and --agent-env into an update.
func agentSettings(cmd *cobra.Command, req *guardv1.UpdateGroupConfigRequest, command string, env []string) error {
	if cmd.Flags().Changed("agent-command") {
		args, err := commandWords(command)
		if err != nil {
			return err
		}
		req.AgentCommand = &guardv1.AgentCommand{Args: args}
	}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return usagef("--agent-env %q: want KEY=VALUE (KEY= removes it)", kv)
		}
		if req.AgentEnv == nil {
			req.AgentEnv = map[string]string{}
		}
		req.AgentEnv[k] = v
	}
	return nil
}

// commandWords reads a command: a JSON array of words, or words split on
// white space ("" = none: the image's command).
func commandWords(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "[") {
		var words []string
		if err := json.Unmarshal([]byte(s), &words); err != nil {
			return nil, usagef("--agent-command: not a JSON array of strings: %v", err)
		}
		return words, nil
	}
	return strings.Fields(s), nil
}

// readTextArg reads a file flag's text: "-" is standard input, "" none.
func readTextArg(cmd *cobra.Command, path string) (string, error) {
	var b []byte
	var err error
	switch path {
	case "":
		return "", nil
	case "-":
		b, err = io.ReadAll(cmd.InOrStdin())
	default:
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return "", usagef("%v", err)
	}
	return string(b), nil
}
