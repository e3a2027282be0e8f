// Command llm-agent is the demo's LLM agent: a small agent loop on the
// official Go SDKs whose tools are clawguard-mcp's (every delivery action
// and guarded MCP tool of its session, each decided by the guard), given a
// task, reaching its model only through the runner's model gateway.
//
// It is configured as any agent in a Clawguard container is: by
// ANTHROPIC_BASE_URL and ANTHROPIC_AUTH_TOKEN (the Messages API), else
// OPENAI_BASE_URL and OPENAI_API_KEY (Chat Completions), which the runner
// sets to its gateway and the session's token — never a provider's key.
// The task is CLAWGUARD_TASK, else the group's instructions
// ($CLAWGUARD_WORKSPACE/.clawguard/instructions.md), else a default. The
// model is CLAWGUARD_LLM_MODEL; the turns at most CLAWGUARD_LLM_TURNS (12).
// Its transcript goes to stdout, its final answer to
// $CLAWGUARD_WORKSPACE/llm-answer.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const defaultTask = `You are an agent under Clawguard: every action you take through your tools is decided by a guard,
and some wait for a human's approval. Find out which agent groups you may message (list your destinations),
send one of them a short greeting, then read your inbox once and say in two sentences what you did and what
the guard answered.`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "llm-agent:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string) error {
	model, err := newModel(getenv)
	if err != nil {
		return err
	}
	tools, err := connectTools(ctx, getenv)
	if err != nil {
		return err
	}
	defer tools.Close()
	turns := 12
	if n, err := strconv.Atoi(getenv("CLAWGUARD_LLM_TURNS")); err == nil && n > 0 {
		turns = n
	}
	answer, err := loop(ctx, model, tools, task(getenv), turns, os.Stdout)
	if err != nil {
		return err
	}
	if ws := getenv("CLAWGUARD_WORKSPACE"); ws != "" {
		return os.WriteFile(filepath.Join(ws, "llm-answer.md"), []byte(answer+"\n"), 0o644)
	}
	return nil
}

// task is what the agent is asked to do.
func task(getenv func(string) string) string {
	if t := strings.TrimSpace(getenv("CLAWGUARD_TASK")); t != "" {
		return t
	}
	if ws := getenv("CLAWGUARD_WORKSPACE"); ws != "" {
		if b, err := os.ReadFile(filepath.Join(ws, ".clawguard", "instructions.md")); err == nil && strings.TrimSpace(string(b)) != "" {
			return string(b)
		}
	}
	return defaultTask
}

// connectTools starts clawguard-mcp (CLAWGUARD_MCP, else on PATH or at
// /usr/local/bin) and connects to it over stdio.
func connectTools(ctx context.Context, getenv func(string) string) (*mcp.ClientSession, error) {
	bin := getenv("CLAWGUARD_MCP")
	if bin == "" {
		if p, err := exec.LookPath("clawguard-mcp"); err == nil {
			bin = p
		} else {
			bin = "/usr/local/bin/clawguard-mcp"
		}
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("clawguard-mcp (the agent's tools): %w", err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "clawguard-llm-agent", Version: "1"}, nil)
	return c.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(bin)}, nil)
}

// newModel is the model client the environment names: the gateway's
// Anthropic endpoint, else its OpenAI one.
func newModel(getenv func(string) string) (model, error) {
	switch {
	case getenv("ANTHROPIC_BASE_URL") != "":
		return newAnthropic(getenv("CLAWGUARD_LLM_MODEL")), nil
	case getenv("OPENAI_BASE_URL") != "":
		return newOpenAI(getenv("CLAWGUARD_LLM_MODEL")), nil
	}
	return nil, errors.New("no model endpoint: ANTHROPIC_BASE_URL and OPENAI_BASE_URL are unset (this runner does not serve its sessions the model gateway)")
}
