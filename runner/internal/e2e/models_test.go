package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/modelgw/fakeprovider"
	"github.com/clawguard/clawguard/runner/internal/runtime/docker"
	"github.com/clawguard/clawguard/runner/internal/sessions"
)

// modelWorld is a group on the Debian base given an anthropic and an openai
// provider (the fake one, over TLS on the host's loopback, whose CA the
// runner trusts through --model-ca-file), one agent container that only
// waits, and the SDK client and the demo's LLM agent in its workspace.
type modelWorld struct {
	s         *server
	r         *runner
	group     string
	sess      *sessions.Session
	container string
	provider  *fakeprovider.Provider
}

func newModelWorld(t *testing.T) *modelWorld {
	t.Helper()
	base := debianBase(t)
	ctx := context.Background()
	ca := fakeprovider.NewCA(t)
	w := &modelWorld{s: startServer(t), provider: fakeprovider.New(t, ca)}
	w.s.owner(t, "telegram:olivia")
	resp, err := w.s.op.registry.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: "models", BaseImage: base})
	if err != nil {
		t.Fatal(err)
	}
	w.group = resp.GetGroup().GetId()
	t.Cleanup(func() { removeGroupImages(t, w.group) })
	for _, p := range []*guardv1.SetModelProviderRequest{
		{Name: "anthropic", Kind: guardv1.ModelProviderKind_MODEL_PROVIDER_KIND_ANTHROPIC, BaseUrl: w.provider.URL, Credential: ptrTo(w.provider.Keys["anthropic"])},
		{Name: "openai", Kind: guardv1.ModelProviderKind_MODEL_PROVIDER_KIND_OPENAI, BaseUrl: w.provider.URL, Credential: ptrTo(w.provider.Keys["openai"])},
	} {
		if _, err := w.s.op.registry.SetModelProvider(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.s.op.registry.SetModelProviders(ctx, &guardv1.SetModelProvidersRequest{Group: w.group, Providers: []string{"anthropic", "openai"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.s.op.registry.UpdateGroupConfig(ctx, &guardv1.UpdateGroupConfigRequest{Group: w.group,
		AgentCommand: &guardv1.AgentCommand{Args: []string{"sleep", "3600"}}}); err != nil {
		t.Fatal(err)
	}
	w.r = w.s.startRunner(t, runnerOpts{runtime: "docker", groups: []string{w.group}, modelCAFile: ca.Bundle})
	w.sess = w.r.session(t, w.group)
	w.container = w.r.Runtime.(*docker.Runtime).ContainerName(w.sess.ID)
	waitFor(t, 120*time.Second, "the agent container", func() bool {
		c, err := dockerClient(t).ContainerInspect(ctx, w.container)
		return err == nil && c.State != nil && c.State.Running
	})
	for _, b := range []string{"sdkclient", "llm-agent"} {
		bin, err := os.ReadFile(filepath.Join(bins, b))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(w.sess.Dir, b), bin, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func ptrTo(s string) *string { return &s }

// usage is the group's model usage by provider/model.
func (w *modelWorld) usage(t *testing.T) map[string]*guardv1.ModelUsage {
	t.Helper()
	resp, err := w.s.op.registry.ListModelUsage(context.Background(), &guardv1.ListModelUsageRequest{Group: w.group})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*guardv1.ModelUsage{}
	for _, u := range resp.GetUsage() {
		out[u.GetProvider()+"/"+u.GetModel()] = u
	}
	return out
}

// The official SDKs in a real agent container of a real runner, configured
// by nothing but what the runner put in its environment, reach the
// provider through the gateway with the real key; the container's
// environment and processes hold no real key, only the session's token;
// usage lands per group and model. Then the demo's LLM agent, in the same
// container, completes its task against the provider, its tool call (an
// install) decided by the guard: held.
func TestModelsFromAContainer(t *testing.T) {
	w := newModelWorld(t)
	out, code := execIn(t, w.container, "/workspace/sdkclient")
	lines := map[string]map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		var l map[string]any
		if json.Unmarshal(sc.Bytes(), &l) == nil {
			lines[fmt.Sprint(l["call"])] = l
		}
	}
	if code != 0 {
		t.Fatalf("sdkclient: exit %d\n%s", code, out)
	}
	for _, call := range []string{"anthropic", "anthropic-stream", "chat", "chat-stream", "responses", "responses-stream"} {
		if l := lines[call]; l == nil || l["error"] != nil || !strings.HasPrefix(fmt.Sprint(l["text"]), "he") {
			t.Errorf("%s: %v", call, l)
		}
	}
	keys := []string{w.provider.Keys["anthropic"], w.provider.Keys["openai"]}
	info, err := dockerClient(t).ContainerInspect(context.Background(), w.container)
	if err != nil {
		t.Fatal(err)
	}
	token := ""
	for _, e := range info.Config.Env {
		if v, ok := strings.CutPrefix(e, "ANTHROPIC_AUTH_TOKEN="); ok {
			token = v
		}
	}
	envs, _ := lines["environments"]["env"].([]any)
	if token == "" || len(envs) == 0 {
		t.Fatalf("the container has no session token (%q) or its processes no environment", token)
	}
	for _, key := range keys {
		for _, e := range append(info.Config.Env, fmt.Sprint(envs)) {
			if strings.Contains(e, key) {
				t.Errorf("the container holds the real key (%.40s…)", e)
			}
		}
	}
	for _, q := range w.provider.Requests() {
		if strings.Contains(fmt.Sprint(q.Header), token) {
			t.Errorf("the provider saw the session's token on %s", q.Path)
		}
	}
	waitFor(t, 15*time.Second, "the usage", func() bool {
		u := w.usage(t)
		return u["anthropic/claude-sonnet-4-5"].GetCalls() == 2 && u["openai/gpt-5"].GetCalls() == 4
	})
	w.llmAgentCompletesItsTask(t)
}

// llmAgentCompletesItsTask runs the demo's LLM agent in the container: the
// model (scripted) asks for an install, clawguard-mcp sends it to the
// runner, the guard holds it; the model reads the answer and says so.
func (w *modelWorld) llmAgentCompletesItsTask(t *testing.T) {
	t.Helper()
	w.provider.Script = func(body map[string]any) string {
		msgs, _ := body["messages"].([]any)
		if len(msgs) == 1 {
			return `{"id":"msg_a","type":"message","role":"assistant","model":"claude-sonnet-4-5","stop_reason":"tool_use","stop_sequence":null,` +
				`"content":[{"type":"tool_use","id":"toolu_1","name":"install_packages","input":{"apt":["cowsay"],"reason":"the task asks for it"}}],` +
				`"usage":{"input_tokens":90,"output_tokens":30}}`
		}
		b, _ := json.Marshal(msgs[len(msgs)-1])
		text := "The install is not done."
		if strings.Contains(strings.ToLower(string(b)), "held") {
			text = "I asked to install cowsay; the guard held it for an approver."
		}
		return `{"id":"msg_b","type":"message","role":"assistant","model":"claude-sonnet-4-5","stop_reason":"end_turn","stop_sequence":null,` +
			`"content":[{"type":"text","text":` + quote(text) + `}],"usage":{"input_tokens":150,"output_tokens":20}}`
	}
	out, code := execIn(t, w.container, "env", "CLAWGUARD_TASK=Install cowsay, then say what happened.", "CLAWGUARD_LLM_TURNS=4", "/workspace/llm-agent")
	if code != 0 || !strings.Contains(out, "held it for an approver") {
		t.Fatalf("llm-agent: exit %d\n%s", code, out)
	}
	answer, err := os.ReadFile(filepath.Join(w.sess.Dir, "llm-answer.md"))
	if err != nil || !strings.Contains(string(answer), "held it") {
		t.Fatalf("its answer: %q %v", answer, err)
	}
	holds, err := w.s.op.approvals.List(context.Background(), &guardv1.ListRequest{AgentGroupId: w.group,
		Status: guardv1.HoldStatus_HOLD_STATUS_PENDING, Kind: "install_packages"})
	if err != nil || len(holds.GetHolds()) != 1 {
		t.Fatalf("the agent's install: %v %v, want one pending hold", holds, err)
	}
	if u := w.usage(t)["anthropic/claude-sonnet-4-5"]; u.GetCalls() < 4 {
		t.Fatalf("the LLM agent's calls were not metered: %v", u)
	}
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }
