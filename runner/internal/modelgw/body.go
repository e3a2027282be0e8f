package modelgw

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"

	"github.com/clawguard/clawguard/proto/modelrule"
)

// route is one endpoint the gateway serves.
type route struct {
	kind     string // modelrule.KindAnthropic or KindOpenAI
	upstream string // appended to the provider's base URL
	// outputKeys are the body's output bounds, the first the one written
	// when none is given ("" = the call has no output: count_tokens).
	outputKeys []string
	chat       bool // a chat completion (n choices; stream usage asked for)
	responses  bool // the Responses API
}

// meters reports whether the call is billed (and so reserved and settled).
func (r route) meters() bool { return len(r.outputKeys) > 0 }

// routes are the served paths. An Anthropic base URL has no /v1 (its SDKs
// add it); an OpenAI one ends in /v1, and OpenAI-compatible clients
// configured without it call the bare paths.
var routes = map[string]route{
	"/v1/messages":              {kind: modelrule.KindAnthropic, upstream: "/v1/messages", outputKeys: []string{"max_tokens"}},
	"/v1/messages/count_tokens": {kind: modelrule.KindAnthropic, upstream: "/v1/messages/count_tokens"},
	"/v1/chat/completions":      {kind: modelrule.KindOpenAI, upstream: "/chat/completions", outputKeys: []string{"max_completion_tokens", "max_tokens"}, chat: true},
	"/chat/completions":         {kind: modelrule.KindOpenAI, upstream: "/chat/completions", outputKeys: []string{"max_completion_tokens", "max_tokens"}, chat: true},
	"/v1/responses":             {kind: modelrule.KindOpenAI, upstream: "/responses", outputKeys: []string{"max_output_tokens"}, responses: true},
	"/responses":                {kind: modelrule.KindOpenAI, upstream: "/responses", outputKeys: []string{"max_output_tokens"}, responses: true},
}

// call is a request body as the gateway read it once, and the canonical
// encoding of exactly that, which is what the provider receives.
type call struct {
	model  string
	stream bool
	// output is the most output tokens the provider may produce (its bound
	// times the choices asked for); 0 for a call that produces none.
	output int64
	body   []byte
}

// intRe is a JSON number the gateway takes for a count: digits only (no
// sign, fraction or exponent a provider might read another way).
var intRe = regexp.MustCompile(`^[0-9]{1,15}$`)

// readCall parses a body once. The provider reads what the gateway read:
// the top-level object is decoded (a repeated key keeps its last value)
// and encoded again, keys sorted, so no duplicate can say one thing to the
// gateway and another to the provider. Its output bound is read, or the
// gateway's default written in; a streamed chat completion is asked for
// its usage.
func readCall(rt route, raw []byte, l Limits) (call, *refusal) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil || top == nil {
		return call{}, invalid("the request body is not a JSON object")
	}
	var c call
	if err := json.Unmarshal(top["model"], &c.model); err != nil || c.model == "" {
		return call{}, invalid("model: required, a string")
	}
	if err := modelrule.CheckModel(c.model); err != nil {
		return call{}, invalid("model: %v", err)
	}
	if s, ok := top["stream"]; ok && string(s) != "null" {
		if err := json.Unmarshal(s, &c.stream); err != nil {
			return call{}, invalid("stream: true or false")
		}
	}
	if rt.meters() {
		out, rf := outputBound(rt, top, l)
		if rf != nil {
			return call{}, rf
		}
		c.output = out
	}
	if rt.chat && c.stream {
		if rf := askStreamUsage(top); rf != nil {
			return call{}, rf
		}
	}
	if rt.responses {
		if b, ok := top["background"]; ok && string(b) != "false" && string(b) != "null" {
			return call{}, invalid("background: a background response's usage cannot be metered through the gateway; call it in the foreground")
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(top); err != nil {
		return call{}, invalid("the request body: %v", err)
	}
	c.body = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	return c, nil
}

// outputBound reads the call's output bound (one of the route's keys; two
// given is ambiguous and refused), writing the default when none is, and
// multiplies it by the choices a chat completion asks for.
func outputBound(rt route, top map[string]json.RawMessage, l Limits) (int64, *refusal) {
	var (
		key   string
		bound int64
	)
	for _, k := range rt.outputKeys {
		v, ok := top[k]
		if !ok || string(v) == "null" {
			delete(top, k)
			continue
		}
		if key != "" {
			return 0, invalid("%s and %s are both set: set one", key, k)
		}
		n, err := count(v)
		if err != nil || n < 1 {
			return 0, invalid("%s: a whole number of tokens, at least 1", k)
		}
		if n > l.MaxOutput {
			return 0, invalid("%s: %d is more than this gateway allows a call (%d)", k, n, l.MaxOutput)
		}
		key, bound = k, n
	}
	if key == "" {
		bound = l.DefaultOutput
		top[rt.outputKeys[0]] = json.RawMessage(strconv.FormatInt(bound, 10))
	}
	if rt.chat {
		n := int64(1)
		if v, ok := top["n"]; ok && string(v) != "null" {
			var err error
			if n, err = count(v); err != nil || n < 1 || n > 128 {
				return 0, invalid("n: a whole number of choices, 1 to 128")
			}
		}
		bound *= n
	}
	return bound, nil
}

// count reads a JSON number that is a plain count.
func count(v json.RawMessage) (int64, error) {
	s := string(bytes.TrimSpace(v))
	if !intRe.MatchString(s) {
		return 0, fmt.Errorf("not a whole number: %s", s)
	}
	return strconv.ParseInt(s, 10, 64)
}

// askStreamUsage makes a streamed chat completion end with its usage
// (stream_options.include_usage), which OpenAI sends only when asked.
func askStreamUsage(top map[string]json.RawMessage) *refusal {
	opts := map[string]json.RawMessage{}
	if v, ok := top["stream_options"]; ok && string(v) != "null" {
		if err := json.Unmarshal(v, &opts); err != nil || opts == nil {
			return invalid("stream_options: an object")
		}
	}
	opts["include_usage"] = json.RawMessage("true")
	b, err := json.Marshal(opts)
	if err != nil {
		return invalid("stream_options: %v", err)
	}
	top["stream_options"] = b
	return nil
}

// inputBound is an upper bound of a call's input tokens: the body's size in
// bytes (every token of text stands for at least one byte of it), plus what
// a provider adds of its own (a tool-use system prompt). Input the body
// does not carry — an image or a file by URL or id, a previous response the
// provider keeps — is not in it: the settle counts what the provider
// reports.
func inputBound(body []byte, l Limits) int64 { return int64(len(body)) + l.InputOverhead }

// kindOfRequest is the API whose error shape answers a request the gateway
// does not serve: an x-api-key header is Anthropic's.
func kindOfRequest(r *http.Request) string {
	if r.Header.Get("X-Api-Key") != "" || r.Header.Get("Anthropic-Version") != "" {
		return modelrule.KindAnthropic
	}
	return modelrule.KindOpenAI
}
