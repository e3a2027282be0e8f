package e2e

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/mcpface"
	"github.com/clawguard/clawguard/runner/internal/sessions"
)

// restartsOf counts the runner's ack-deadline restarts of a session's agent.
func (r *runner) restartsOf(t *testing.T, s *sessions.Session) int {
	t.Helper()
	b, err := os.ReadFile(r.logFile)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "agent holds inbox items without acknowledging them; restarting it") && strings.Contains(line, "session="+s.ID) {
			n++
		}
	}
	return n
}

// TestMCPFaceKeepsWhatTheModelHasNotRead: the real clawguard-mcp binary on
// a real runner with a 2 s --inbox-ack-deadline. Messages pushed to its
// session are acknowledged once in its queue, so the runner's ack deadline
// does not restart an agent whose model simply has not read them — while a
// session whose agent reads nothing is restarted, the proof the deadline
// ran. clawguard-mcp is then SIGKILLed, the model still not having read:
// the next clawguard-mcp in the workspace shows the messages once.
func TestMCPFaceKeepsWhatTheModelHasNotRead(t *testing.T) {
	s := startServer(t)
	alpha := s.group(t, "alpha", guardv1.CliScope_CLI_SCOPE_GROUP)
	beta := s.group(t, "beta", guardv1.CliScope_CLI_SCOPE_GROUP)
	r := s.startRunner(t, runnerOpts{groups: []string{alpha, beta}, agentBinary: quietAgent, ackDeadline: 2 * time.Second})
	sa, sb := r.session(t, alpha), r.session(t, beta)

	cmd := mcpOn(sa)
	startMCP(t, cmd)
	var want []string
	for i := range 3 {
		text := fmt.Sprintf("hello %d", i+1)
		want = append(want, "message: "+text)
		if err := sa.Inbox.Durable(fmt.Sprintf("e2e-push-%d", i+1), &agentv1.InboxResponse{Item: &agentv1.InboxResponse_Message{
			Message: &agentv1.InboundMessage{Id: fmt.Sprintf("m%d", i+1), FromAgentGroupId: beta, Text: text}}}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "the messages acknowledged by clawguard-mcp", func() bool { return sa.Inbox.Len() == 0 })

	// The control: beta's agent reads nothing; its message is held up.
	if err := sb.Inbox.Durable("e2e-push-b", &agentv1.InboxResponse{Item: &agentv1.InboxResponse_Message{
		Message: &agentv1.InboundMessage{Id: "mb", FromAgentGroupId: alpha, Text: "unread"}}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the ack deadline restarting beta's agent", func() bool { return r.restartsOf(t, sb) > 0 })
	if n := r.restartsOf(t, sa); n != 0 {
		t.Fatalf("the ack deadline restarted alpha's agent %d times; its model had simply not read yet", n)
	}

	if err := cmd.Process.Kill(); err != nil { // SIGKILL, the model having read nothing
		t.Fatal(err)
	}
	_ = cmd.Wait() // gone, and its lock on the queue with it
	h := startMCP(t, mcpOn(sa))
	var got []string
	for _, it := range toolItems(t, h.call(t, mcpface.ReadInbox, nil)) {
		got = append(got, it["kind"].(string)+": "+it["text"].(string))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("after the SIGKILL the model was shown %q, want %q", got, want)
	}
	if again := toolItems(t, h.call(t, mcpface.ReadInbox, nil)); len(again) != 0 {
		t.Fatalf("shown again: %v", again)
	}
	if n := r.restartsOf(t, sa); n != 0 {
		t.Fatalf("alpha's agent was restarted %d times by the ack deadline", n)
	}
}
