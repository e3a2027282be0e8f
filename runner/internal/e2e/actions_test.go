package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/types/known/structpb"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/app"
	"github.com/clawguard/clawguard/runner/internal/delivery"
	"github.com/clawguard/clawguard/runner/internal/gateway"
	"github.com/clawguard/clawguard/runner/internal/sessions"
)

// do makes a session's demo agent run a step: "/do <step>" in its inbox.
func do(s *sessions.Session, id string, st map[string]any) {
	b, _ := json.Marshal(st)
	s.Inbox.Message(&agentv1.InboundMessage{Id: id, Text: "/do " + string(b)})
}

// doServed runs a step through the agent, again while the answer is
// "rate limited", and returns the first real answer.
func doServed(t *testing.T, s *sessions.Session, st map[string]any) event {
	t.Helper()
	var got event
	waitFor(t, 30*time.Second, "a served answer", func() bool {
		id := fmt.Sprintf("try-%d", time.Now().UnixNano())
		do(s, id, st)
		got = waitEvent(t, s, "answer to "+id, func(e event) bool { return e.s("type") == "send" && e.s("request_id") == "do-"+id })
		return !strings.Contains(got.s("reason"), "rate limited")
	})
	return got
}

func step(action string, payload map[string]any) map[string]any {
	return map[string]any{"action": action, "payload": payload}
}

// a2aSetup: groups A and B, a destination A→B and a message policy A→B
// naming dana as the exclusive approver; one runner hosting both.
func a2aSetup(t *testing.T, s *server, runtime string) (a, b string, dana string, r *runner) {
	ctx := context.Background()
	a = s.group(t, "alpha", guardv1.CliScope_CLI_SCOPE_GROUP)
	b = s.group(t, "beta", guardv1.CliScope_CLI_SCOPE_GROUP)
	s.owner(t, "telegram:olivia")
	dana = "telegram:dana"
	if _, err := s.op.registry.CreateUser(ctx, &guardv1.CreateUserRequest{Id: dana}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.op.registry.AddDestination(ctx, &guardv1.AddDestinationRequest{Group: a, Name: "beta", TargetGroup: b}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.op.registry.SetPolicy(ctx, &guardv1.SetPolicyRequest{FromGroup: a, ToGroup: b, ApproverUserId: dana}); err != nil {
		t.Fatal(err)
	}
	if runtime == "docker" {
		t.Cleanup(func() { removeGroupImages(t, a, b) })
	}
	r = s.startRunner(t, runnerOpts{runtime: runtime, groups: []string{a, b}, script: map[string]any{
		a: []any{step("send_message", map[string]any{"to": b, "text": "hello beta"})},
	}})
	return a, b, dana, r
}

func TestA2AHeldApprovedDelivered(t *testing.T) {
	for _, runtime := range []string{"process", "docker"} {
		t.Run(runtime, func(t *testing.T) {
			if runtime == "docker" {
				needDocker(t)
			}
			testA2AHeldApprovedDelivered(t, runtime)
		})
	}
}

func testA2AHeldApprovedDelivered(t *testing.T, runtime string) {
	s := startServer(t)
	a, b, dana, r := a2aSetup(t, s, runtime)
	sa, sb := r.session(t, a), r.session(t, b)
	held := waitEvent(t, sa, "HELD notice", notice("HELD"))
	if held.s("hold_id") == "" {
		t.Fatalf("held without hold id: %v", held)
	}
	hold, err := s.op.approvals.Get(context.Background(), &guardv1.GetRequest{Id: held.s("hold_id")})
	if err != nil {
		t.Fatal(err)
	}
	if h := hold.GetHold(); h.GetKind() != "a2a_message_gate" || h.GetDeliveryAction() != "send_message" || h.GetTitle() != "Message approval" ||
		h.GetApproverRule().GetExclusive().GetUserId() != dana || h.GetSessionId() != sa.ID {
		t.Fatalf("hold = %v", h)
	}
	if !noEvent(sb, func(e event) bool { return e.s("type") == "message" }) {
		t.Fatal("message delivered before approval")
	}
	// Beta's agent is stopped (as if idle): the delivery push wakes it.
	if err := r.Runtime.Stop(context.Background(), sb.ID); err != nil {
		t.Fatal(err)
	}
	if running, _ := r.Runtime.Running(context.Background()); contains(running, sb.ID) {
		t.Fatal("beta still running after stop")
	}
	s.approve(t, held.s("hold_id"), dana)
	msg := waitEvent(t, sb, "message in beta's inbox", func(e event) bool { return e.s("type") == "message" })
	if msg.s("text") != "hello beta" || msg.s("from") != a {
		t.Fatalf("delivered %v", msg)
	}
	waitEvent(t, sa, "RESULT notice", notice("RESULT"))
}

func TestA2ARevokedBeforeApprovalIsNotDelivered(t *testing.T) {
	s := startServer(t)
	a, b, dana, r := a2aSetup(t, s, "process")
	sa, sb := r.session(t, a), r.session(t, b)
	held := waitEvent(t, sa, "HELD notice", notice("HELD"))
	if _, err := s.op.registry.RemoveDestination(context.Background(), &guardv1.RemoveDestinationRequest{Group: a, Name: "beta"}); err != nil {
		t.Fatal(err)
	}
	s.approve(t, held.s("hold_id"), dana)
	denied := waitEvent(t, sa, "DENIED notice after the replay", notice("DENIED"))
	if denied.s("hold_id") != held.s("hold_id") {
		t.Fatalf("denied notice %v", denied)
	}
	// The replay was decided (denied) and nothing reached beta.
	if !noEvent(sb, func(e event) bool { return e.s("type") == "message" }) {
		dumpEvents(t, sb)
		t.Fatal("revoked message delivered (D3)")
	}
}

func TestCreateAgentAllowedForGlobalScopeHeldForGroupScope(t *testing.T) {
	s := startServer(t)
	s.owner(t, "telegram:olivia")
	global := s.group(t, "trusted", guardv1.CliScope_CLI_SCOPE_GLOBAL)
	confined := s.group(t, "confined", guardv1.CliScope_CLI_SCOPE_GROUP)
	r := s.startRunner(t, runnerOpts{groups: []string{global, confined}, script: map[string]any{
		global:   []any{step("create_agent", map[string]any{"name": "helper-one"})},
		confined: []any{step("create_agent", map[string]any{"name": "helper-two"}), step("create_agent", map[string]any{"name": ""})},
	}})
	sg, sc := r.session(t, global), r.session(t, confined)

	done := waitEvent(t, sg, "create_agent done", func(e event) bool { return e.s("type") == "send" && e.s("action") == "create_agent" })
	if done.s("status") != "DONE" {
		t.Fatalf("global-scope create_agent: %v", done)
	}
	groups, err := s.op.registry.ListGroups(context.Background(), &guardv1.ListGroupsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, g := range groups.GetGroups() {
		names[g.GetName()] = true
	}
	if !names["helper-one"] || names["helper-two"] {
		t.Fatalf("groups after create_agent: %v", names)
	}

	held := waitEvent(t, sc, "create_agent held", func(e event) bool {
		return e.s("type") == "send" && e.s("request_id") == "script-1"
	})
	if held.s("status") != "HELD" || held.s("hold_id") == "" {
		t.Fatalf("group-scope create_agent: %v", held)
	}
	// The malformed request is answered by the payload schema: FAILED, no hold.
	bad := waitEvent(t, sc, "empty-name create_agent", func(e event) bool { return e.s("type") == "send" && e.s("request_id") == "script-2" })
	if bad.s("status") != "FAILED" || !strings.Contains(bad.s("reason"), "name: pattern") {
		t.Fatalf("empty name: %v", bad)
	}
	// A retried send (same request id) gets the same hold; nothing is made twice.
	do(sc, "dup", step("create_agent", map[string]any{"name": "helper-three"}))
	do(sc, "dup", step("create_agent", map[string]any{"name": "helper-three"}))
	var answers []event
	waitFor(t, 30*time.Second, "two answers to the retried send", func() bool {
		answers = nil
		for _, e := range events(sc.Dir) {
			if e.s("type") == "send" && e.s("request_id") == "do-dup" {
				answers = append(answers, e)
			}
		}
		return len(answers) == 2
	})
	if answers[0].s("hold_id") == "" || answers[0].s("hold_id") != answers[1].s("hold_id") {
		t.Fatalf("retry answers: %v", answers)
	}
	list, err := s.op.approvals.List(context.Background(), &guardv1.ListRequest{Kind: "create_agent"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetHolds()) != 2 {
		t.Fatalf("want exactly two create_agent holds (helper-two, helper-three), got %d", len(list.GetHolds()))
	}
	if n := testutil.ToFloat64(r.Metrics.DeliveryActionsTotal.WithLabelValues("create_agent", "allow")); n != 1 {
		t.Fatalf("create_agent allow count %v", n)
	}
	if n := testutil.ToFloat64(r.Metrics.DeliveryActionsTotal.WithLabelValues("create_agent", "hold")); n < 2 {
		t.Fatalf("create_agent hold count %v", n)
	}
}

func TestGarbageAndFloodGetNoticesAndDoNotStallTheRunner(t *testing.T) {
	s := startServer(t)
	g := s.group(t, "noisy", guardv1.CliScope_CLI_SCOPE_GROUP)
	quiet := s.group(t, "quiet", guardv1.CliScope_CLI_SCOPE_GROUP)
	// The limits of before issue 42 (the defaults are a tool-heavy agent's
	// now): a flood of 300 at once is past them.
	r := s.startRunner(t, runnerOpts{gateway: gateway.Limits{Rate: 20, Burst: 40, InFlight: 8}, groups: []string{g, quiet}, script: map[string]any{
		g: []any{
			map[string]any{"garbage": 20},
			map[string]any{"flood": 300},
		},
		quiet: []any{step("cli_request", map[string]any{"method": "ListGroups"})},
	}})
	sn, sq := r.session(t, g), r.session(t, quiet)
	flood := waitEvent(t, sn, "flood answers", func(e event) bool { return e.s("type") == "flood" })
	answers, _ := flood["answers"].(map[string]any)
	limited := 0.0
	for k, v := range answers {
		if strings.Contains(k, "rate limited") {
			limited += v.(float64)
		}
		if strings.HasPrefix(k, "error") {
			t.Fatalf("flood sends got transport errors: %v", answers)
		}
	}
	if limited == 0 {
		t.Fatalf("flood not rate limited: %v", answers)
	}
	waitEvent(t, sn, "rate-limit notice", func(e event) bool {
		return e.s("type") == "notice" && e.s("kind") == "FAILED" && strings.Contains(e.s("text"), "rate limited")
	})
	// After the flood the same agent is served again once its bucket
	// refills (it retries while the answer is "rate limited").
	if last := doServed(t, sn, step("cli_request", map[string]any{"method": "ListGroups"})); last.s("status") != "DONE" {
		t.Fatalf("cli_request after the flood: %v", last)
	}
	unknown := doServed(t, sn, step("no_such_action", map[string]any{}))
	bad := doServed(t, sn, step("install_packages", map[string]any{"apt": []any{"Bad Name"}}))
	if unknown.s("status") != "FAILED" || !strings.Contains(unknown.s("reason"), "unknown action") ||
		bad.s("status") != "FAILED" || !strings.Contains(bad.s("reason"), `apt[]: pattern: "Bad Name"`) {
		t.Fatalf("garbage requests: %v %v", unknown, bad)
	}
	// The other session was never stalled.
	if q := waitEvent(t, sq, "quiet agent's cli_request", func(e event) bool { return e.s("type") == "send" }); q.s("status") != "DONE" {
		t.Fatalf("quiet agent: %v", q)
	}
	select {
	case err := <-r.done:
		t.Fatalf("runner stopped: %v", err)
	default:
	}
}

func TestRogueRegistrationIsRefusedWithAViolation(t *testing.T) {
	s := startServer(t)
	r := s.startRunner(t, runnerOpts{noRun: true})
	if err := r.Register(context.Background()); err != nil {
		t.Fatalf("the runner's own manifest is refused: %v", err)
	}
	// A rogue (skill-installed) action with no mapping, not on the server's exemption list.
	err := r.Actions.Register(delivery.Action{Name: "rm_rf_workspace", Run: func(context.Context, delivery.Call) delivery.Outcome {
		return delivery.Done(&structpb.Struct{}, "")
	}})
	if err != nil {
		t.Fatal(err)
	}
	err = r.Register(context.Background())
	var ce *app.ConformanceError
	if !errors.As(err, &ce) {
		t.Fatalf("register: %v, want a conformance error", err)
	}
	if len(ce.Violations) != 1 || !strings.Contains(ce.Violations[0], `"rm_rf_workspace"`) {
		t.Fatalf("violations = %v", ce.Violations)
	}
	if b := ce.Banner(); !strings.Contains(b, "guard conformance failure") || !strings.Contains(b, "rm_rf_workspace") {
		t.Fatalf("banner:\n%s", b)
	}
	// Re-registering a guarded action without its mapping never gets that far.
	if err := r.Actions.Register(delivery.Action{Name: "install_packages", Run: func(context.Context, delivery.Call) delivery.Outcome { return delivery.Outcome{} }}); err == nil {
		t.Fatal("disarming install_packages was accepted")
	}
}

func TestUnreachableGuardFailsClosed(t *testing.T) {
	s := startServer(t)
	s.owner(t, "telegram:olivia")
	g := s.group(t, "lonely", guardv1.CliScope_CLI_SCOPE_GLOBAL)
	r := s.startRunner(t, runnerOpts{groups: []string{g}, decideWait: 2 * time.Second})
	sg := r.session(t, g)
	waitEvent(t, sg, "agent started", func(e event) bool { return e.s("type") == "start" })
	s.stop() // the control plane goes away
	start := time.Now()
	do(sg, "offline", step("create_agent", map[string]any{"name": "while-offline"}))
	got := waitEvent(t, sg, "answer while the server is down", func(e event) bool { return e.s("type") == "send" && e.s("request_id") == "do-offline" })
	if got.s("status") != "FAILED" || !strings.Contains(got.s("reason"), "guard could not be reached") {
		t.Fatalf("offline create_agent: %v", got)
	}
	if waited := time.Since(start); waited < 2*time.Second {
		t.Fatalf("failed after %s, before the %s wait", waited, 2*time.Second)
	}
	waitEvent(t, sg, "FAILED notice", func(e event) bool {
		return e.s("type") == "notice" && e.s("kind") == "FAILED" && e.s("request_id") == "do-offline"
	})
}

func TestRejectNoticeAndRestartPushReachTheAgent(t *testing.T) {
	s := startServer(t)
	owner := s.owner(t, "telegram:olivia")
	g := s.group(t, "pushed", guardv1.CliScope_CLI_SCOPE_GROUP)
	r := s.startRunner(t, runnerOpts{groups: []string{g}, script: []any{
		step("add_mcp_server", map[string]any{"name": "fs", "command": "mcp-fs", "args": []any{"/workspace"}}),
	}})
	sg := r.session(t, g)
	held := waitEvent(t, sg, "add_mcp_server held", notice("HELD"))
	_, err := s.op.approvals.Resolve(context.Background(), &guardv1.ResolveRequest{Id: held.s("hold_id"),
		Outcome: guardv1.Outcome_OUTCOME_REJECT, AsUser: owner, Reason: "not today"})
	if err != nil {
		t.Fatal(err)
	}
	rej := waitEvent(t, sg, "REJECTED notice", notice("REJECTED"))
	if rej.s("hold_id") != held.s("hold_id") || !strings.Contains(rej.s("text"), "not today") {
		t.Fatalf("rejected notice: %v", rej)
	}

	// An operator restart of the group restarts its agent (a fresh start event).
	starts := func() int {
		n := 0
		for _, e := range events(sg.Dir) {
			if e.s("type") == "start" {
				n++
			}
		}
		return n
	}
	before := starts()
	if _, err := s.op.registry.RestartGroup(context.Background(), &guardv1.RestartGroupRequest{Group: g}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the agent restarted", func() bool { return starts() > before })
}

func TestRunnerOverTLS(t *testing.T) {
	s := startServerTLS(t, newTestCert(t))
	g := s.group(t, "secure", guardv1.CliScope_CLI_SCOPE_GROUP)
	r := s.startRunner(t, runnerOpts{groups: []string{g}, script: []any{step("cli_request", map[string]any{"method": "ListGroups"})}})
	sg := r.session(t, g)
	if got := waitEvent(t, sg, "cli_request over TLS", func(e event) bool { return e.s("type") == "send" }); got.s("status") != "DONE" {
		t.Fatalf("over TLS: %v", got)
	}
}
