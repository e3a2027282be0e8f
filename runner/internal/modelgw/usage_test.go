package modelgw

import (
	"strings"
	"testing"

	"github.com/clawguard/clawguard/proto/modelrule"
)

// The meter reads the same usage however the stream is cut into chunks:
// a line split anywhere (a key cut in two included) is read whole; a
// chat's null usages are passed over; the word "usage" in the model's own
// text is not taken for a count.
func TestTheMeterReadsAStreamCutAnywhere(t *testing.T) {
	streams := []struct {
		path, stream string
		want         modelrule.Tokens
	}{
		{"/v1/messages", "event: message_start\r\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":11,\"cache_read_input_tokens\":3,\"output_tokens\":1}}}\r\n\r\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"the \\\"usage\\\": 999 usage\"}}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":7}}\n\n" +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", modelrule.Tokens{Input: 11, Output: 7, CacheRead: 3}},
		{"/v1/chat/completions", "data: {\"choices\":[{\"delta\":{\"content\":\"usage\"}}],\"usage\":null}\n\n" +
			"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}],\"usage\": null}\n\n" +
			"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":20,\"completion_tokens\":5,\"prompt_tokens_details\":{\"cached_tokens\":4}}}\n\ndata: [DONE]\n\n",
			modelrule.Tokens{Input: 16, Output: 5, CacheRead: 4}},
	}
	for _, s := range streams {
		for cut := 1; cut < len(s.stream); cut++ {
			m := newMeter(routes[s.path], "text/event-stream")
			m.feed([]byte(s.stream[:cut]))
			m.feed([]byte(s.stream[cut:]))
			if got, complete := m.result(); got != s.want || !complete {
				t.Fatalf("%s cut at %d (%q): %+v complete=%v, want %+v", s.path, cut, s.stream[max(0, cut-10):cut], got, complete, s.want)
			}
		}
		m := newMeter(routes[s.path], "text/event-stream")
		for _, b := range []byte(s.stream) { // a byte at a time
			m.feed([]byte{b})
		}
		if got, _ := m.result(); got != s.want {
			t.Fatalf("%s a byte at a time: %+v", s.path, got)
		}
	}
	if !strings.Contains(streams[0].stream, `usage`) {
		t.Fatal("the stream does not test the word in text")
	}
}
