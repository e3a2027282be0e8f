package guard

import "testing"

// The trace is built on the decision log's hot write path: one small JSON
// value per catalog decision (figures in the console's report / ARCHITECTURE).
func BenchmarkEncodeTrace(b *testing.B) {
	e := &Entry{Action: "a2a.send", TraceArgs: []string{"name"}}
	in := &Input{Action: "a2a.send", Actor: agent, Resource: map[string]string{"to": "ag-2"},
		Payload: map[string]any{"to": "ag-2", "text": "a message body that is not kept"}}
	f := NewFacts(map[string]string{"destination": "true", "target_exists": "true", "policy_approver": "telegram:dana", "action_mode": "enforce"})
	b.ReportAllocs()
	var n int
	for b.Loop() {
		n = len(encodeTrace(e, in, f))
	}
	b.ReportMetric(float64(n), "bytes/trace")
}
