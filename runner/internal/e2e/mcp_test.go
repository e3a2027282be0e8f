package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/runtime/docker"
	"github.com/clawguard/clawguard/runner/internal/sessions"
)

// The test MCP server (internal/mcphost/testdata/fsmcp): a binary for the
// process runtime, a FROM scratch image of it for the docker runtime.
var (
	fsmcpOnce  sync.Once
	fsmcpBin   string
	fsmcpImage = "clawguard-fsmcp:e2e"
	fsmcpErr   error
)

func buildFSMCP(t *testing.T, runtime string) {
	t.Helper()
	fsmcpOnce.Do(func() {
		fsmcpBin = filepath.Join(bins, "fsmcp")
		cmd := exec.Command("go", "build", "-trimpath", "-o", fsmcpBin, "github.com/clawguard/clawguard/runner/internal/mcphost/testdata/fsmcp")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			fsmcpErr = fmt.Errorf("build fsmcp: %v\n%s", err, out)
			return
		}
		if dockerErr == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			r, err := docker.New(ctx, docker.Config{InstallID: "e2e-build"})
			if err != nil {
				fsmcpErr = err
				return
			}
			defer r.Close()
			fsmcpErr = r.BuildBaseImage(ctx, fsmcpBin, fsmcpImage)
		}
	})
	if fsmcpErr != nil {
		t.Fatal(fsmcpErr)
	}
	if runtime == "docker" {
		needDocker(t)
	}
}

// mcpWorld is a group with the guarded MCP server fs (credential FS_TOKEN),
// two owners, a runner hosting its session, and a gateway client standing
// in for the agent's MCP host.
type mcpWorld struct {
	s       *server
	r       *runner
	group   string
	sess    *sessions.Session
	gw      agentv1.AgentGatewayClient
	runtime string
	n       int
}

const fsSecret = "s3cret-only-for-the-mcp-server"

func newMCPWorld(t *testing.T, runtime string) *mcpWorld {
	t.Helper()
	return newMCPWorldOn(t, startServer(t), runtime, runnerOpts{})
}

// newMCPWorldOn is newMCPWorld on server s, its runner started with o
// (its runtime and groups set here).
func newMCPWorldOn(t *testing.T, s *server, runtime string, o runnerOpts) *mcpWorld {
	t.Helper()
	buildFSMCP(t, runtime)
	s.owner(t, "telegram:1")
	s.owner(t, "telegram:2")
	w := &mcpWorld{s: s, runtime: runtime, group: s.group(t, "mcp", guardv1.CliScope_CLI_SCOPE_GROUP)}
	srv := &guardv1.McpServer{Name: "fs", Command: fsmcpBin, Env: map[string]string{"FS_TOKEN": fsSecret}}
	if runtime == "docker" {
		srv.Command, srv.Image = "/agent", fsmcpImage
	}
	if _, err := s.op.registry.AddGroupMcpServer(context.Background(), &guardv1.AddGroupMcpServerRequest{Group: w.group, Server: srv}); err != nil {
		t.Fatal(err)
	}
	o.runtime, o.groups = runtime, []string{w.group}
	w.r = s.startRunner(t, o)
	t.Cleanup(func() {
		if t.Failed() { // the runner's own lines (the harness shows the tail, mostly agent output)
			b, _ := os.ReadFile(w.r.logFile)
			var own []string
			for _, l := range strings.Split(string(b), "\n") {
				if !strings.Contains(l, "agent output") {
					own = append(own, l)
				}
			}
			t.Logf("runner log without agent output:\n%s", strings.Join(own, "\n"))
			if w.sess != nil {
				dumpEvents(t, w.sess)
			}
		}
	})
	w.sess = w.r.session(t, w.group)
	conn, err := grpc.NewClient("unix://"+w.sess.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	w.gw = agentv1.NewAgentGatewayClient(conn)
	return w
}

func (w *mcpWorld) tools(t *testing.T) map[string]*agentv1.McpTool {
	t.Helper()
	resp, err := w.gw.ListTools(context.Background(), &agentv1.ListToolsRequest{})
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	out := map[string]*agentv1.McpTool{}
	for _, tl := range resp.GetTools() {
		out[tl.GetServer()+"/"+tl.GetTool()] = tl
	}
	return out
}

func (w *mcpWorld) call(t *testing.T, tool string, args map[string]any) *agentv1.SendResponse {
	t.Helper()
	w.n++
	p, err := structpb.NewStruct(map[string]any{"server": "fs", "tool": tool, "arguments": args})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := w.gw.Send(context.Background(), &agentv1.SendRequest{RequestId: "call-" + strconv.Itoa(w.n), Action: "mcp_call", Payload: p})
	if err != nil {
		t.Fatalf("Send mcp_call %s: %v", tool, err)
	}
	return resp
}

func (w *mcpWorld) set(t *testing.T, tool string, e guardv1.Effect, approvals int32, mode guardv1.EnforcementMode) {
	t.Helper()
	if _, err := w.s.op.registry.SetMcpTool(context.Background(), &guardv1.SetMcpToolRequest{Group: w.group, Server: "fs", Tool: tool,
		Effect: e, Approvals: approvals, Mode: mode}); err != nil {
		t.Fatalf("SetMcpTool %s: %v", tool, err)
	}
}

// resultText is the text content of a CallToolResult answer.
func resultText(r *agentv1.SendResponse) string {
	var parts []string
	for _, c := range r.GetResult().GetFields()["content"].GetListValue().GetValues() {
		parts = append(parts, c.GetStructValue().GetFields()["text"].GetStringValue())
	}
	return strings.Join(parts, "")
}

func TestGuardedMCPToolCallsProcess(t *testing.T) { testGuardedMCPToolCalls(t, "process") }
func TestGuardedMCPToolCallsDocker(t *testing.T)  { testGuardedMCPToolCalls(t, "docker") }

// Over real MCP on stdio, against a real MCP server the runner starts:
// allowed calls run; held calls wait for approval and run once with the
// approved arguments; a tool's quorum and audit mode apply; denied tools
// are not listed; a tool that appears later is unset (held); a server
// removed after approval denies the replay.
func testGuardedMCPToolCalls(t *testing.T, runtime string) {
	w := newMCPWorld(t, runtime)
	ctx := context.Background()

	tools := w.tools(t)
	for _, name := range []string{"fs/write_file", "fs/read_file", "fs/credential", "fs/add_tool"} {
		if tl := tools[name]; tl == nil || tl.GetEffect() != "" || !strings.Contains(tl.GetInputSchemaJson(), "object") {
			t.Fatalf("ListTools: %s = %v (all: %v)", name, tl, tools)
		}
	}

	// Allowed: runs, and the server has its credential.
	w.set(t, "credential", guardv1.Effect_EFFECT_ALLOW, 0, 0)
	w.set(t, "read_file", guardv1.Effect_EFFECT_ALLOW, 0, 0)
	if r := w.call(t, "credential", nil); r.GetStatus() != agentv1.SendStatus_SEND_STATUS_DONE || resultText(r) != "FS_TOKEN="+fsSecret {
		t.Fatalf("allowed call: %v", r)
	}
	// The listing follows the setting once the server's notice that the
	// group's tool settings changed reaches the runner (the call above was
	// decided live either way).
	waitFor(t, 10*time.Second, "the listing to show credential allowed", func() bool { return w.tools(t)["fs/credential"].GetEffect() == "allow" })

	// Held: answered at once; approved, it runs once with exactly the
	// approved arguments, and the result reaches the agent's inbox.
	held := w.call(t, "write_file", map[string]any{"path": "a.txt", "content": "approved;"})
	if held.GetStatus() != agentv1.SendStatus_SEND_STATUS_HELD || held.GetHoldId() == "" {
		t.Fatalf("unset tool: %v, want HELD", held)
	}
	h, err := w.s.op.approvals.Get(ctx, &guardv1.GetRequest{Id: held.GetHoldId()})
	if err != nil {
		t.Fatal(err)
	}
	if q := h.GetHold().GetQuestion(); !strings.Contains(q, "write_file") || !strings.Contains(q, "fs") || !strings.Contains(q, `"approved;"`) ||
		h.GetHold().GetResource()["tool"] != "write_file" || h.GetHold().GetPayload().GetFields()["arguments"].GetStructValue().GetFields()["content"].GetStringValue() != "approved;" {
		t.Fatalf("the hold does not show server, tool and arguments: %v", h.GetHold())
	}
	w.s.approve(t, held.GetHoldId(), "telegram:1")
	ev := waitEvent(t, w.sess, "the approved call's result", func(e event) bool {
		return e.s("type") == "notice" && e.s("kind") == "RESULT" && e.s("hold_id") == held.GetHoldId()
	})
	if !strings.Contains(ev.s("text"), "wrote 9 bytes to a.txt") {
		t.Fatalf("result notice: %v", ev)
	}
	if r := w.call(t, "read_file", map[string]any{"path": "a.txt"}); resultText(r) != "approved;" {
		t.Fatalf("the approved call ran other than once with its arguments: %q (%v)", resultText(r), r)
	}

	// Quorum on a tool: one approval of two runs nothing.
	w.set(t, "write_file", guardv1.Effect_EFFECT_HOLD, 2, 0)
	q := w.call(t, "write_file", map[string]any{"path": "q.txt", "content": "quorum"})
	if q.GetStatus() != agentv1.SendStatus_SEND_STATUS_HELD {
		t.Fatalf("quorum tool: %v", q)
	}
	w.s.approve(t, q.GetHoldId(), "telegram:1")
	if r := w.call(t, "read_file", map[string]any{"path": "q.txt"}); !resultIsError(r) {
		t.Fatalf("one approval of two ran the call: %v", r)
	}
	w.s.approve(t, q.GetHoldId(), "telegram:2")
	waitEvent(t, w.sess, "the quorum call's result", func(e event) bool { return e.s("kind") == "RESULT" && e.s("hold_id") == q.GetHoldId() })

	// Audit mode on a tool: runs now; the log says enforce would hold.
	w.set(t, "write_file", guardv1.Effect_EFFECT_HOLD, 0, guardv1.EnforcementMode_ENFORCEMENT_MODE_AUDIT)
	if r := w.call(t, "write_file", map[string]any{"path": "audit.txt", "content": "x"}); r.GetStatus() != agentv1.SendStatus_SEND_STATUS_DONE {
		t.Fatalf("audit mode: %v", r)
	}
	decs, err := w.s.op.registry.ListDecisions(ctx, &guardv1.ListDecisionsRequest{Action: "mcp.call"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(decs.GetDecisions(), func(d *guardv1.DecisionRecord) bool {
		return d.GetMode() == "audit" && d.GetWouldEffect() == guardv1.Effect_EFFECT_HOLD
	}) {
		t.Fatalf("no audit-mode decision logged: %v", decs)
	}

	// Denied: not listed, and a call is denied.
	w.set(t, "read_file", guardv1.Effect_EFFECT_DENY, 0, 0)
	waitFor(t, 10*time.Second, "a denied tool to leave the listing", func() bool { _, listed := w.tools(t)["fs/read_file"]; return !listed })
	if r := w.call(t, "read_file", map[string]any{"path": "a.txt"}); r.GetStatus() != agentv1.SendStatus_SEND_STATUS_DENIED {
		t.Fatalf("denied tool: %v", r)
	}

	// A tool that appears later (tools/list_changed) is unset: listed,
	// held; the agent is told its tools changed.
	w.set(t, "add_tool", guardv1.Effect_EFFECT_ALLOW, 0, 0)
	if r := w.call(t, "add_tool", map[string]any{"name": "late"}); r.GetStatus() != agentv1.SendStatus_SEND_STATUS_DONE {
		t.Fatalf("add_tool: %v", r)
	}
	waitEvent(t, w.sess, "TOOLS_CHANGED from the server's list_changed", func(e event) bool {
		return e.s("kind") == "TOOLS_CHANGED" && e.s("text") == "Your MCP tools changed: list them again."
	})
	if tl := w.tools(t)["fs/late"]; tl == nil || tl.GetEffect() != "" {
		t.Fatalf("the late tool: %v", tl)
	}
	if r := w.call(t, "late", nil); r.GetStatus() != agentv1.SendStatus_SEND_STATUS_HELD {
		t.Fatalf("the late tool must be held until set: %v", r)
	}

	// Removed after approval: the replay is denied and the agent told.
	w.set(t, "write_file", guardv1.Effect_EFFECT_UNSPECIFIED, 0, 0)
	gone := w.call(t, "write_file", map[string]any{"path": "gone.txt", "content": "never"})
	if gone.GetStatus() != agentv1.SendStatus_SEND_STATUS_HELD {
		t.Fatalf("want HELD: %v", gone)
	}
	if _, err := w.s.op.registry.RemoveGroupMcpServer(ctx, &guardv1.RemoveGroupMcpServerRequest{Group: w.group, Name: "fs"}); err != nil {
		t.Fatal(err)
	}
	w.s.approve(t, gone.GetHoldId(), "telegram:1")
	waitEvent(t, w.sess, "the denied replay", func(e event) bool {
		return e.s("kind") == "DENIED" && e.s("hold_id") == gone.GetHoldId() && strings.Contains(e.s("text"), "no MCP server")
	})
	if _, err := os.Stat(filepath.Join(w.r.dataDir, "mcp", w.group, "fs", "gone.txt")); !os.IsNotExist(err) {
		t.Fatalf("the replay denied after removal wrote its file (%v)", err)
	}

	w.checkIsolation(t)
}

func resultIsError(r *agentv1.SendResponse) bool {
	return r.GetStatus() == agentv1.SendStatus_SEND_STATUS_DONE && r.GetResult().GetFields()["isError"].GetBoolValue()
}

// checkIsolation: the agent has no path to the MCP server but the gateway,
// and never its credential.
func (w *mcpWorld) checkIsolation(t *testing.T) {
	t.Helper()
	if w.runtime == "docker" {
		cli := dockerClient(t)
		ctx := context.Background()
		agent, err := cli.ContainerInspect(ctx, w.r.Runtime.(*docker.Runtime).ContainerName(w.sess.ID))
		if err != nil {
			t.Fatal(err)
		}
		if agent.HostConfig.NetworkMode != "none" || !agent.Config.NetworkDisabled {
			t.Fatalf("agent container network: %v", agent.HostConfig.NetworkMode)
		}
		for _, m := range agent.Mounts {
			// The workspace and the session's endpoints: the gateway, and
			// its way out (whose proxy never reaches a private address, an
			// MCP server's container included).
			if m.Destination != "/workspace" && m.Destination != "/run/clawguard/gateway.sock" && m.Destination != "/run/clawguard/egress.sock" {
				t.Fatalf("agent container mounts %s → %s", m.Source, m.Destination)
			}
			if strings.Contains(m.Source, string(filepath.Separator)+"mcp"+string(filepath.Separator)) {
				t.Fatalf("agent container mounts an MCP server's data: %s", m.Source)
			}
		}
		if slices.ContainsFunc(agent.Config.Env, func(e string) bool { return strings.Contains(e, fsSecret) }) {
			t.Fatal("the MCP server's credential is in the agent's environment")
		}
		// The MCP server's container (if still running) shares nothing with it.
		list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "dev.clawguard.mcp-server"))})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range list {
			in, err := cli.ContainerInspect(ctx, c.ID)
			if err != nil {
				continue
			}
			for _, m := range in.Mounts {
				if m.Destination != "/data" {
					t.Fatalf("MCP server container mounts %s → %s", m.Source, m.Destination)
				}
			}
		}
		return
	}
	// Process runtime: the agent's environment lacks the credential, and the
	// server's stdio are pipes only the runner holds.
	found := 0
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range procs {
		env, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		vars := strings.Split(string(env), "\x00")
		if slices.Contains(vars, "CLAWGUARD_SESSION_ID="+w.sess.ID) {
			found++
			if strings.Contains(string(env), fsSecret) {
				t.Fatal("the MCP server's credential is in the agent's environment")
			}
		}
		if slices.Contains(vars, "FS_TOKEN="+fsSecret) {
			if slices.ContainsFunc(vars, func(v string) bool { return strings.HasPrefix(v, "CLAWGUARD_") }) {
				t.Fatalf("the MCP server's environment has the agent's variables: %v", vars)
			}
			dir := filepath.Dir(p)
			for _, fd := range []string{"0", "1"} {
				l, err := os.Readlink(filepath.Join(dir, "fd", fd))
				if err == nil && !strings.HasPrefix(l, "pipe:") {
					t.Fatalf("MCP server fd %s is %s, want a pipe", fd, l)
				}
			}
		}
	}
	if found == 0 {
		t.Fatal("the agent's process was not found")
	}
}

// An approved call whose apply another runner process claimed (one that
// died before its result was delivered) is not run again: the agent is told
// it may or may not have run. At most once, never silent.
func TestApprovedMCPCallClaimedByADeadRunnerIsNotRunAgain(t *testing.T) {
	w := newMCPWorld(t, "process")
	ctx := context.Background()
	held := w.call(t, "write_file", map[string]any{"path": "claimed.txt", "content": "twice?"})
	if held.GetStatus() != agentv1.SendStatus_SEND_STATUS_HELD {
		t.Fatalf("want HELD: %v", held)
	}
	hold := held.GetHoldId()
	pool, err := pgxpool.New(ctx, w.s.db)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// Approved, and the replay taken by the runner that then died: it
	// consumed the grant and claimed the apply, and never ran the call.
	if _, err := pool.Exec(ctx, `UPDATE holds SET status = 'approved', resolved_at = now() WHERE id = $1`, hold); err != nil {
		t.Fatal(err)
	}
	tok, err := os.ReadFile(filepath.Join(w.r.dataDir, "runner.token"))
	if err != nil {
		t.Fatal(err)
	}
	conn := dial(t, w.s.addr, string(tok), nil)
	actx := metadata.AppendToOutgoingContext(ctx, "x-clawguard-session", w.sess.ID)
	var res map[string]string // the decided resource, as the hold keeps it
	if err := pool.QueryRow(ctx, `SELECT resource FROM holds WHERE id = $1`, hold).Scan(&res); err != nil {
		t.Fatal(err)
	}
	p, _ := structpb.NewStruct(map[string]any{"server": "fs", "tool": "write_file", "arguments": map[string]any{"path": "claimed.txt", "content": "twice?"}})
	d, err := guardv1.NewGuardClient(conn).Decide(actx, &guardv1.DecideRequest{Action: "mcp.call", Resource: res, Payload: p, Grant: hold, RequestId: "replay:" + hold})
	if err != nil || d.GetDecision().GetEffect() != guardv1.Effect_EFFECT_ALLOW {
		t.Fatalf("the dead runner's replay: %v %v", d, err)
	}
	claimed := proto.Clone(p).(*structpb.Struct)
	claimed.Fields["claim"] = structpb.NewStringValue("inst_dead")
	if _, err := guardv1.NewRegistryClient(conn).ApplyAction(actx, &guardv1.ApplyActionRequest{DecisionId: d.GetDecisionId(), SessionId: w.sess.ID,
		Action: "mcp.call", Payload: claimed, Resource: res}); err != nil {
		t.Fatalf("the dead runner's claim: %v", err)
	}
	// Its replay push, sent again to the live runner.
	body, err := proto.Marshal(&guardv1.Push{Id: "push_again", SessionId: w.sess.ID, AgentGroupId: w.group, Body: &guardv1.Push_Replay{Replay: &guardv1.ReplayAction{
		HoldId: hold, DeliveryAction: "mcp_call", CatalogAction: "mcp.call", Payload: p, Resource: res}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO runner_pushes (id, runner_id, session_id, kind, body, hold_id) VALUES ('push_again', $1, $2, 'replay', $3, $4)`,
		w.r.Config.ID, w.sess.ID, body, hold); err != nil {
		t.Fatal(err)
	}
	ev := waitEvent(t, w.sess, "the not-run-again notice", func(e event) bool { return e.s("kind") == "FAILED" && e.s("hold_id") == hold })
	if !strings.Contains(ev.s("text"), "was not run again") {
		t.Fatalf("notice: %v", ev)
	}
	waitFor(t, 30*time.Second, "the push acknowledged", func() bool {
		var acked bool
		return pool.QueryRow(ctx, `SELECT acked_at IS NOT NULL FROM runner_pushes WHERE id = 'push_again'`).Scan(&acked) == nil && acked
	})
	if _, err := os.Stat(filepath.Join(w.r.dataDir, "mcp", w.group, "fs", "claimed.txt")); !os.IsNotExist(err) {
		t.Fatalf("a call claimed by another process ran again (%v)", err)
	}
}
