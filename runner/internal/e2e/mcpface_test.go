package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/mcpface"
	"github.com/clawguard/clawguard/runner/internal/runtime/docker"
	"github.com/clawguard/clawguard/runner/internal/sessions"
)

// mcpHost is the Go SDK's MCP client standing in for an agent's MCP host
// (Claude Code, say), running the real clawguard-mcp binary over stdio.
type mcpHost struct {
	cs      *mcp.ClientSession
	mu      sync.Mutex
	updates int // notifications/resources/updated for the inbox
}

func (h *mcpHost) updated() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.updates
}

// startMCP runs cmd (clawguard-mcp, directly or through docker exec -i) as
// an MCP server and connects to it with the protocol today's hosts speak.
func startMCP(t *testing.T, cmd *exec.Cmd) *mcpHost {
	t.Helper()
	logf, err := os.Create(filepath.Join(t.TempDir(), "clawguard-mcp.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logf
	h := &mcpHost{}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-host", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			if r.Params.URI == mcpface.InboxURI {
				h.mu.Lock()
				h.updates++
				h.mu.Unlock()
			}
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect to clawguard-mcp: %v", err)
	}
	h.cs = cs
	t.Cleanup(func() {
		cs.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("clawguard-mcp stderr:\n%s", tail(string(b), 4000))
		}
	})
	return h
}

// mcpOn is clawguard-mcp for a session as its agent's MCP host runs it:
// the session's socket and workspace in its environment.
func mcpOn(s *sessions.Session) *exec.Cmd {
	cmd := exec.Command(mcpBin, "--call-wait", "30s", "--log-level", "debug")
	cmd.Env = append(os.Environ(), "CLAWGUARD_GATEWAY_SOCKET="+s.Socket, "CLAWGUARD_WORKSPACE="+s.Dir)
	return cmd
}

func (h *mcpHost) call(t *testing.T, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := h.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	return res
}

func toolText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func toolData(t *testing.T, r *mcp.CallToolResult) map[string]any {
	t.Helper()
	b, _ := json.Marshal(r.StructuredContent)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func toolItems(t *testing.T, r *mcp.CallToolResult) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, it := range toolData(t, r)["items"].([]any) {
		out = append(out, it.(map[string]any))
	}
	return out
}

func sameJSON(t *testing.T, v any) string {
	t.Helper()
	var b []byte
	switch x := v.(type) {
	case string:
		b = []byte(x)
	default:
		b, _ = json.Marshal(x)
	}
	var m any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(m)
	return string(out)
}

// TestMCPFaceOverTheRealGateway: clawguard-mcp against a real runner's
// gateway, the guard on a real server: tools are the runner's actions with
// their schemas; an allowed action runs; a malformed one is refused by the
// schema with no hold; a denied one says why; a held one answers at once
// with the hold and its approver, is approved through the Approvals API and
// its result arrives once as an inbox item (announced to the host); the
// other agent's wait_for_messages returns with the delivered message, and
// times out cleanly when nothing comes.
func TestMCPFaceOverTheRealGateway(t *testing.T) {
	s := startServer(t)
	ctx := context.Background()
	alpha := s.group(t, "alpha", guardv1.CliScope_CLI_SCOPE_GROUP)
	beta := s.group(t, "beta", guardv1.CliScope_CLI_SCOPE_GROUP)
	gamma := s.group(t, "gamma", guardv1.CliScope_CLI_SCOPE_GROUP)
	s.owner(t, "telegram:olivia")
	dana := "telegram:dana"
	if _, err := s.op.registry.CreateUser(ctx, &guardv1.CreateUserRequest{Id: dana}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.op.registry.AddDestination(ctx, &guardv1.AddDestinationRequest{Group: alpha, Name: "beta", TargetGroup: beta}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.op.registry.SetPolicy(ctx, &guardv1.SetPolicyRequest{FromGroup: alpha, ToGroup: beta, ApproverUserId: dana}); err != nil {
		t.Fatal(err)
	}
	r := s.startRunner(t, runnerOpts{groups: []string{alpha, beta}, agentBinary: quietAgent})
	sa, sb := r.session(t, alpha), r.session(t, beta)
	ha, hb := startMCP(t, mcpOn(sa)), startMCP(t, mcpOn(sb))

	// tools/list: every delivery action, with the schema the runner validates with.
	tools, err := ha.cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	offered := map[string]*mcp.Tool{}
	for _, tl := range tools.Tools {
		offered[tl.Name] = tl
	}
	specs := slices.DeleteFunc(r.Actions.Specs(), func(s *agentv1.ActionSpec) bool { return s.GetName() == mcpface.MCPCall })
	for _, spec := range specs {
		tl := offered[spec.GetName()]
		if tl == nil {
			t.Errorf("delivery action %s is not a tool", spec.GetName())
			continue
		}
		if sameJSON(t, tl.InputSchema) != sameJSON(t, spec.GetInputSchemaJson()) || tl.Description != spec.GetDescription() {
			t.Errorf("%s: tool schema %s, the runner's %s", spec.GetName(), sameJSON(t, tl.InputSchema), spec.GetInputSchemaJson())
		}
	}
	if len(offered) != len(specs)+2 || offered[mcpface.ReadInbox] == nil || offered[mcpface.WaitForMessages] == nil {
		t.Fatalf("tools %v for %d actions", slices.Sorted(func(yield func(string) bool) {
			for n := range offered {
				yield(n)
			}
		}), len(specs))
	}

	// Allowed (cli_request is exempt; the server guards the command): done.
	res := ha.call(t, "cli_request", map[string]any{"method": "ListGroups"})
	if res.IsError || toolData(t, res)["status"] != "done" || !strings.Contains(toolText(res), `"groups"`) {
		t.Fatalf("cli_request: %s", toolText(res))
	}

	// Malformed: refused by the schema, clearly, and no hold is made.
	res = ha.call(t, "install_packages", map[string]any{"apt": []any{"Bad Name"}})
	if !res.IsError || toolData(t, res)["status"] != "failed" || !strings.Contains(toolText(res), `apt[]: pattern: "Bad Name"`) {
		t.Fatalf("malformed install_packages: %s", toolText(res))
	}
	if l, err := s.op.approvals.List(ctx, &guardv1.ListRequest{}); err != nil || len(l.GetHolds()) != 0 {
		t.Fatalf("holds after a malformed request: %v %v", l.GetHolds(), err)
	}

	// Denied: no destination alpha → gamma.
	res = ha.call(t, "send_message", map[string]any{"to": gamma, "text": "hi"})
	if !res.IsError || toolData(t, res)["status"] != "denied" || toolData(t, res)["reason"] == "" {
		t.Fatalf("send_message to gamma: %s", toolText(res))
	}

	// Nothing for beta yet: wait_for_messages times out cleanly.
	res = hb.call(t, mcpface.WaitForMessages, map[string]any{"timeout_seconds": 1})
	if res.IsError || toolData(t, res)["timed_out"] != true || len(toolItems(t, res)) != 0 {
		t.Fatalf("wait_for_messages on an empty inbox: %s", toolText(res))
	}
	waited := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := hb.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: mcpface.WaitForMessages, Arguments: map[string]any{"timeout_seconds": 120}})
		if err != nil {
			t.Errorf("wait_for_messages: %v", err)
		}
		waited <- res
	}()

	// Held: answered at once (the hold is still pending when the answer is
	// here), with the hold and who may approve it.
	if err := ha.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: mcpface.InboxURI}); err != nil {
		t.Fatal(err)
	}
	res = ha.call(t, "send_message", map[string]any{"to": beta, "text": "hello beta"})
	d := toolData(t, res)
	holdID, _ := d["hold_id"].(string)
	if res.IsError || d["status"] != "held" || holdID == "" || d["approvers"] != dana ||
		!strings.Contains(toolText(res), "held for approval by telegram:dana as "+holdID+"; you will be told the outcome") {
		t.Fatalf("held send_message: %s %v", toolText(res), d)
	}
	hold, err := s.op.approvals.Get(ctx, &guardv1.GetRequest{Id: holdID})
	if err != nil || hold.GetHold().GetStatus() != guardv1.HoldStatus_HOLD_STATUS_PENDING {
		t.Fatalf("hold %s after the answer: %v %v", holdID, hold.GetHold(), err)
	}
	s.approve(t, holdID, dana)

	// Beta's agent was waiting: the message arrives.
	select {
	case res := <-waited:
		if res == nil || !strings.Contains(toolText(res), "message from agent group "+alpha+": hello beta") {
			t.Fatalf("beta's wait_for_messages: %v", res)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("beta's wait_for_messages did not return with the message")
	}

	// Alpha hears the outcome: announced, then read once.
	waitFor(t, 60*time.Second, "the inbox resource's update", func() bool { return ha.updated() > 0 })
	var results []map[string]any
	waitFor(t, 60*time.Second, "the RESULT of the approved send", func() bool {
		for _, it := range toolItems(t, ha.call(t, mcpface.ReadInbox, nil)) {
			if it["hold_id"] == holdID && it["kind"] == "result" {
				results = append(results, it)
			}
		}
		return len(results) > 0
	})
	for _, it := range toolItems(t, ha.call(t, mcpface.ReadInbox, nil)) {
		if it["hold_id"] == holdID && it["kind"] == "result" {
			results = append(results, it)
		}
	}
	if len(results) != 1 || !strings.Contains(results[0]["text"].(string), "send_message") {
		t.Fatalf("the approved send's result arrived %d times: %v", len(results), results)
	}
}

// TestMCPFaceInTheAgentImage: the agent image carries clawguard-mcp at its
// path, and an MCP host in the container reaches the runner through it
// (tools/list and a call over docker exec -i), its inbox queue in the
// workspace the container's user may write.
func TestMCPFaceInTheAgentImage(t *testing.T) {
	needDocker(t)
	s := startServer(t)
	g := s.group(t, "mcp-docker", guardv1.CliScope_CLI_SCOPE_GROUP)
	t.Cleanup(func() { removeGroupImages(t, g) })
	r := s.startRunner(t, runnerOpts{runtime: "docker", groups: []string{g}})
	sess := r.session(t, g)
	rt := r.Runtime.(*docker.Runtime)
	waitEvent(t, sess, "agent started", func(e event) bool { return e.s("type") == "start" })

	h := startMCP(t, exec.Command("docker", "exec", "-i", rt.ContainerName(sess.ID), docker.MCPBinaryPath, "--log-level", "debug"))
	tools, err := h.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	want := slices.DeleteFunc(r.Actions.Names(), func(n string) bool { return n == mcpface.MCPCall })
	for _, want := range append(want, mcpface.ReadInbox, mcpface.WaitForMessages) {
		if !slices.Contains(names, want) {
			t.Errorf("tools/list in the container lacks %s: %v", want, names)
		}
	}
	if res := h.call(t, "cli_request", map[string]any{"method": "ListGroups"}); res.IsError || !strings.Contains(toolText(res), g) {
		t.Fatalf("cli_request from the container: %s", toolText(res))
	}
	// Its inbox queue is in the workspace mount: on the host, in the
	// session's directory, outliving the container.
	if _, err := os.Stat(filepath.Join(sess.Dir, ".clawguard-mcp", "inbox.jsonl")); err != nil {
		t.Fatalf("clawguard-mcp's inbox queue in the session directory: %v", err)
	}
}

// TestMCPFaceInTheDebianImage: an agent image on the Debian base (as make
// debian-image builds it) carries clawguard-mcp at its path, and it runs.
func TestMCPFaceInTheDebianImage(t *testing.T) {
	base := debianBase(t)
	ctx := context.Background()
	tag := fmt.Sprintf("clawguard-agent-demo-debian:e2e-mcp-%d", time.Now().UnixNano())
	build, err := docker.New(ctx, docker.Config{InstallID: "e2e-debian-mcp"})
	if err != nil {
		t.Fatal(err)
	}
	defer build.Close()
	if err := build.BuildAgentBase(ctx, docker.BaseImage{From: base, Agent: demoAgent, MCP: mcpBin, Tag: tag}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dockerClient(t).ImageRemove(context.Background(), tag, image.RemoveOptions{Force: true}) })
	out, err := exec.Command("docker", "run", "--rm", "--network", "none", "--entrypoint", docker.MCPBinaryPath, tag, "--version").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("%s --version in %s: %v: %s", docker.MCPBinaryPath, tag, err, out)
	}
}
