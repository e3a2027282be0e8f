package modelgw

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"

	"github.com/clawguard/clawguard/proto/modelrule"
)

// A call's usage is counted from the provider's own fields as its answer
// passes, never by holding it back: each chunk is handed on as it came, and
// only a copy of what can carry usage is kept — a server-sent event's data
// line that names "usage" (or ends the stream), or a JSON answer whole, up
// to a bound.

// maxKept bounds what the meter keeps of one line or one JSON answer; past
// it the usage is not read and the call settles as cut (at its bound).
const maxKept = 8 << 20

// usageFields are the usage fields of both providers' answers.
type usageFields struct {
	// Anthropic; Responses API: input_tokens and output_tokens too.
	InputTokens   int64 `json:"input_tokens"`
	OutputTokens  int64 `json:"output_tokens"`
	CacheCreation int64 `json:"cache_creation_input_tokens"`
	CacheRead     int64 `json:"cache_read_input_tokens"`
	// Chat Completions.
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	PromptDetails    struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	InputDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
}

// tokens are the fields as a budget counts them: input without its cached
// part (OpenAI counts cached tokens inside the prompt's).
func (u usageFields) tokens(rt route) modelrule.Tokens {
	switch {
	case rt.kind == modelrule.KindAnthropic:
		return modelrule.Tokens{Input: u.InputTokens, Output: u.OutputTokens, CacheRead: u.CacheRead, CacheWrite: u.CacheCreation}
	case rt.chat:
		cached := min(u.PromptDetails.CachedTokens, u.PromptTokens)
		return modelrule.Tokens{Input: u.PromptTokens - cached, Output: u.CompletionTokens, CacheRead: cached}
	}
	cached := min(u.InputDetails.CachedTokens, u.InputTokens)
	return modelrule.Tokens{Input: u.InputTokens - cached, Output: u.OutputTokens, CacheRead: cached}
}

// event is the part of an answer (or of one event's data) that carries usage.
type event struct {
	Type     string                           `json:"type"`
	Usage    json.RawMessage                  `json:"usage"`
	Message  *struct{ Usage json.RawMessage } `json:"message"`  // Anthropic message_start
	Response *struct{ Usage json.RawMessage } `json:"response"` // Responses API events
}

// meter counts one call's usage.
type meter struct {
	rt  route
	sse bool

	mu       sync.Mutex
	used     modelrule.Tokens
	complete bool
	line     []byte // the event line being read
	dropping bool   // the line is past maxKept: skipped to its end
	whole    bytes.Buffer
}

func newMeter(rt route, contentType string) *meter {
	return &meter{rt: rt, sse: bytes.HasPrefix([]byte(contentType), []byte("text/event-stream"))}
}

// feed reads a chunk of the answer as it passes. Of a stream only the lines
// that name usage or end it are read: a chunk with neither is passed over
// at the speed of a byte search (its unfinished last line kept, in case
// the next chunk completes a line that does).
func (m *meter) feed(p []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.sse {
		if m.whole.Len()+len(p) <= maxKept {
			m.whole.Write(p)
		} else {
			m.dropping = true
		}
		return
	}
	for len(p) > 0 {
		if len(m.line) > 0 || m.dropping { // a line a chunk before began
			i := bytes.IndexByte(p, '\n')
			if i < 0 {
				m.keep(p)
				return
			}
			m.keep(p[:i])
			if !m.dropping {
				m.eventLine(bytes.TrimSuffix(m.line, []byte("\r")))
			}
			m.line, m.dropping = m.line[:0], false
			p = p[i+1:]
			continue
		}
		j := firstOf(p, usageWord, stopWord)
		if j < 0 {
			m.keep(p[bytes.LastIndexByte(p, '\n')+1:])
			return
		}
		// Skip the whole lines before the one that names it.
		p = p[bytes.LastIndexByte(p[:j], '\n')+1:]
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			m.keep(p)
			return
		}
		m.eventLine(bytes.TrimSuffix(p[:i], []byte("\r")))
		p = p[i+1:]
	}
}

// firstOf is the index of the first of the keys in p, -1 when none is.
func firstOf(p []byte, keys ...[]byte) int {
	first := -1
	for _, k := range keys {
		if i := bytes.Index(p, k); i >= 0 && (first < 0 || i < first) {
			first = i
		}
	}
	return first
}

func (m *meter) keep(p []byte) {
	if m.dropping {
		return
	}
	if len(m.line)+len(p) > maxKept {
		m.dropping = true
		return
	}
	m.line = append(m.line, p...)
}

var (
	dataPrefix = []byte("data:")
	usageKey   = []byte(`"usage"`)
	stopType   = []byte(`"message_stop"`)
	// What a chunk is searched for: the words alone, whose first letters
	// are rare in JSON (a quote is not), so the search runs at the speed
	// of a byte scan; a line that has one is then read properly.
	usageWord = []byte("usage")
	stopWord  = []byte("message_stop")
)

// eventLine reads one line of a server-sent event stream: only a data line
// that names usage, or Anthropic's message_stop, is decoded.
func (m *meter) eventLine(line []byte) {
	data, ok := bytes.CutPrefix(line, dataPrefix)
	if !ok {
		return
	}
	data = bytes.TrimSpace(data)
	if !bytes.Contains(data, usageKey) && !bytes.Contains(data, stopType) || nullUsage(data) {
		return
	}
	var e event
	if json.Unmarshal(data, &e) != nil {
		return
	}
	switch {
	case e.Type == "message_stop":
		m.complete = true
	case e.Message != nil: // message_start
		m.add(e.Message.Usage)
	case e.Response != nil: // response.completed, .incomplete, .failed
		if m.add(e.Response.Usage) {
			m.complete = true
		}
	case m.add(e.Usage) && m.rt.chat: // a chat stream's last chunk
		m.complete = true
	}
}

// nullUsage reports a line whose only usage is null (every chunk of a chat
// completion streamed with include_usage, but its last): nothing to read.
func nullUsage(data []byte) bool {
	i := bytes.Index(data, usageKey)
	if i < 0 || bytes.Contains(data, stopType) || bytes.Count(data, usageKey) > 1 {
		return false
	}
	rest := bytes.TrimLeft(data[i+len(usageKey):], " \t")
	rest, ok := bytes.CutPrefix(rest, []byte(":"))
	return ok && bytes.HasPrefix(bytes.TrimLeft(rest, " \t"), []byte("null"))
}

// add merges a usage object: each count the largest seen (Anthropic's
// message_delta repeats the counts so far). It reports whether there was one.
func (m *meter) add(raw json.RawMessage) bool {
	if len(raw) == 0 || string(raw) == "null" {
		return false
	}
	var u usageFields
	if json.Unmarshal(raw, &u) != nil {
		return false
	}
	t := u.tokens(m.rt)
	m.used = modelrule.Tokens{Input: max(m.used.Input, t.Input), Output: max(m.used.Output, t.Output),
		CacheRead: max(m.used.CacheRead, t.CacheRead), CacheWrite: max(m.used.CacheWrite, t.CacheWrite)}
	return true
}

// end reads a JSON answer once it is whole.
func (m *meter) end() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sse || m.dropping {
		return
	}
	var e event
	if json.Unmarshal(m.whole.Bytes(), &e) == nil && m.add(e.Usage) {
		m.complete = true
	}
	m.whole.Reset()
}

// result is what was counted, and whether the provider's usage came whole.
func (m *meter) result() (modelrule.Tokens, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.used, m.complete
}

// meteredBody is an answer's body on its way to the agent: every chunk
// read is fed to the meter, and done runs once — at its end, or when it
// is closed before (the agent went away, the provider cut it).
type meteredBody struct {
	rc    io.ReadCloser
	m     *meter
	first func() // the first byte came (once)
	done  func(used modelrule.Tokens, complete bool)

	firstOnce, doneOnce sync.Once
}

func (b *meteredBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.firstOnce.Do(b.first)
		b.m.feed(p[:n])
	}
	if err == io.EOF {
		b.finish(true)
	}
	return n, err
}

func (b *meteredBody) Close() error {
	err := b.rc.Close()
	b.finish(false)
	return err
}

func (b *meteredBody) finish(eof bool) {
	b.doneOnce.Do(func() {
		if eof {
			b.m.end()
		}
		b.done(b.m.result())
	})
}
