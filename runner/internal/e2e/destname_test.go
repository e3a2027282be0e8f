package e2e

import (
	"context"
	"strings"
	"testing"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Issue 46: an agent addresses a destination by its local name (the seed's
// destinations are by name); the id still works; a name with no
// destination is denied, and nothing is delivered for it.
func TestA2ASendsByDestinationName(t *testing.T) {
	s := startServer(t)
	ctx := context.Background()
	a := s.group(t, "alpha", guardv1.CliScope_CLI_SCOPE_GROUP)
	b := s.group(t, "beta", guardv1.CliScope_CLI_SCOPE_GROUP)
	if _, err := s.op.registry.AddDestination(ctx, &guardv1.AddDestinationRequest{Group: a, Name: "ops", TargetGroup: b}); err != nil {
		t.Fatal(err)
	}
	r := s.startRunner(t, runnerOpts{groups: []string{a, b}, script: map[string]any{
		a: []any{
			step("send_message", map[string]any{"to": "ops", "text": "by name"}),
			step("send_message", map[string]any{"to": b, "text": "by id"}),
			step("send_message", map[string]any{"to": "nowhere", "text": "lost"}),
		},
	}})
	sa, sb := r.session(t, a), r.session(t, b)
	for _, text := range []string{"by name", "by id"} {
		msg := waitEvent(t, sb, "message "+text, func(e event) bool { return e.s("type") == "message" && e.s("text") == text })
		if msg.s("from") != a {
			t.Fatalf("%q delivered from %q, want %s", text, msg.s("from"), a)
		}
	}
	waitEvent(t, sa, "the send to a name with no destination denied", func(e event) bool {
		return e.s("kind") == "DENIED" && strings.Contains(e.s("text"), "nowhere")
	})
	if !noEvent(sb, func(e event) bool { return e.s("text") == "lost" }) {
		t.Fatal("a message to a name with no destination was delivered")
	}
}
