// Package fakeprovider is a model provider for tests: both APIs (Anthropic
// Messages, OpenAI Chat Completions and Responses), streamed and not, over
// TLS on loopback with a certificate of a CA of the test's own, whose
// bundle the gateway is given. It answers only the real key, records what
// it received, and reports the usage a real provider would.
package fakeprovider

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// testCA is a CA of the test's own, written to a PEM bundle.
type CA struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	Bundle string // path of the PEM file the gateway is given
}

func NewCA(t testing.TB) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "clawguard test provider CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	bundle := filepath.Join(t.TempDir(), "providers-ca.pem")
	if err := os.WriteFile(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return &CA{cert: cert, key: key, Bundle: bundle}
}

// leaf is a server certificate for 127.0.0.1 signed by the CA.
func (ca *CA) leaf(t testing.TB) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "provider.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// Received is one request as the provider saw it.
type Received struct {
	Path   string
	Query  string
	Host   string
	Header http.Header
	Body   map[string]any
	Raw    string
}

// Provider is the fake provider.
type Provider struct {
	URL  string            // https://127.0.0.1:port
	Keys map[string]string // the real key each API takes: "anthropic" → x-api-key, "openai" → bearer

	mu   sync.Mutex
	got  []Received
	cut  int // > 0: a stream is cut after this many events
	fail int // > 0: answer with this status
	// Script, when set, answers a Messages call instead (the LLM demo's
	// test scripts the model's turns).
	Script func(body map[string]any) string
	// ReportWorst makes a Messages call report the most it could use:
	// input tokens the body's size plus 1024, output its max_tokens (a
	// budget's tests: each call spends what it reserved).
	ReportWorst bool
}

// New starts a provider; it stops when the test ends.
func New(t testing.TB, ca *CA) *Provider {
	t.Helper()
	p := &Provider{Keys: map[string]string{"anthropic": "sk-ant-REAL-provider-key", "openai": "sk-REAL-openai-key"}}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{ca.leaf(t)}})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: p, ErrorLog: nil}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	p.URL = "https://" + ln.Addr().String()
	return p
}

// Requests are what it received, in order.
func (p *Provider) Requests() []Received {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Received(nil), p.got...)
}

// Set makes streams cut after cut events (0: whole) and every answer fail
// with status fail (0: none).
func (p *Provider) Set(cut, fail int) {
	p.mu.Lock()
	p.cut, p.fail = cut, fail
	p.mu.Unlock()
}

func (p *Provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	rec := Received{Path: r.URL.Path, Query: r.URL.RawQuery, Host: r.Host, Header: r.Header.Clone(), Raw: string(raw)}
	json.Unmarshal(raw, &rec.Body)
	p.mu.Lock()
	p.got = append(p.got, rec)
	cut, fail := p.cut, p.fail
	p.mu.Unlock()
	anthropic := strings.HasPrefix(r.URL.Path, "/v1/messages")
	if anthropic && r.Header.Get("X-Api-Key") != p.Keys["anthropic"] || !anthropic && r.Header.Get("Authorization") != "Bearer "+p.Keys["openai"] {
		http.Error(w, `{"error":{"message":"invalid key","type":"authentication_error"}}`, http.StatusUnauthorized)
		return
	}
	if fail > 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(fail)
		fmt.Fprint(w, `{"type":"error","error":{"type":"invalid_request_error","message":"the provider refused it"}}`)
		return
	}
	model, _ := rec.Body["model"].(string)
	stream, _ := rec.Body["stream"].(bool)
	switch {
	case p.Script != nil && r.URL.Path == "/v1/messages" && !stream:
		writeJSON(w, p.Script(rec.Body))
	case r.URL.Path == "/v1/messages/count_tokens":
		writeJSON(w, `{"input_tokens":42}`)
	case r.URL.Path == "/v1/messages" && !stream && p.ReportWorst:
		writeJSON(w, fmt.Sprintf(`{"id":"msg_1","type":"message","role":"assistant","model":%q,"content":[{"type":"text","text":"hello"}],`+
			`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":%d,"output_tokens":%v}}`, model, len(raw)+1024, rec.Body["max_tokens"]))
	case r.URL.Path == "/v1/messages" && !stream:
		writeJSON(w, fmt.Sprintf(`{"id":"msg_1","type":"message","role":"assistant","model":%q,"content":[{"type":"text","text":"hello"}],`+
			`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":11,"output_tokens":7,"cache_read_input_tokens":3,"cache_creation_input_tokens":2}}`, model))
	case r.URL.Path == "/v1/messages":
		sse(w, cut, anthropicEvents(model))
	case r.URL.Path == "/chat/completions" && !stream:
		writeJSON(w, fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,`+
			`"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":20,"completion_tokens":5,"total_tokens":25,"prompt_tokens_details":{"cached_tokens":4}}}`, model))
	case r.URL.Path == "/chat/completions":
		opts, _ := rec.Body["stream_options"].(map[string]any)
		sse(w, cut, chatEvents(model, opts["include_usage"] == true))
	case r.URL.Path == "/responses" && !stream:
		writeJSON(w, responseJSON(model))
	case r.URL.Path == "/responses":
		sse(w, cut, responseEvents(model))
	default:
		http.NotFound(w, r)
	}
}

func writeJSON(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, body)
}

// sse writes events, flushing each; cut > 0 cuts the connection after
// that many (the answer never ends).
func sse(w http.ResponseWriter, cut int, events []string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	f := w.(http.Flusher)
	for i, e := range events {
		if cut > 0 && i == cut {
			panic(http.ErrAbortHandler)
		}
		io.WriteString(w, e)
		f.Flush()
	}
}

func anthropicEvents(model string) []string {
	ev := func(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }
	out := []string{ev("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant",`+
		`"model":%q,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":11,"output_tokens":1,`+
		`"cache_read_input_tokens":3,"cache_creation_input_tokens":2}}}`, model)),
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)}
	for _, word := range []string{"he", "llo", ` "usage" `, "!"} {
		b, _ := json.Marshal(word)
		out = append(out, ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`+string(b)+`}}`))
	}
	return append(out, ev("content_block_stop", `{"type":"content_block_stop","index":0}`),
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":7}}`),
		ev("message_stop", `{"type":"message_stop"}`))
}

func chatEvents(model string, usage bool) []string {
	chunk := func(delta, finish, usage string) string {
		return fmt.Sprintf("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":%q,\"choices\":[%s]%s}\n\n",
			model, choice(delta, finish), usage)
	}
	out := []string{chunk(`{"role":"assistant","content":""}`, "null", `,"usage":null`)}
	for _, w := range []string{"he", "llo"} {
		out = append(out, chunk(`{"content":"`+w+`"}`, "null", `,"usage":null`))
	}
	out = append(out, chunk(`{}`, `"stop"`, `,"usage":null`))
	if usage {
		out = append(out, fmt.Sprintf("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":%q,\"choices\":[],"+
			"\"usage\":{\"prompt_tokens\":20,\"completion_tokens\":5,\"total_tokens\":25,\"prompt_tokens_details\":{\"cached_tokens\":4}}}\n\n", model))
	}
	return append(out, "data: [DONE]\n\n")
}

func choice(delta, finish string) string {
	if delta == "" {
		return ""
	}
	return `{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}`
}

func responseJSON(model string) string {
	return fmt.Sprintf(`{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":%q,"output":[{"type":"message",`+
		`"id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"hello","annotations":[]}]}],`+
		`"parallel_tool_calls":true,"tool_choice":"auto","tools":[],`+
		`"usage":{"input_tokens":30,"output_tokens":6,"total_tokens":36,"input_tokens_details":{"cached_tokens":10},"output_tokens_details":{"reasoning_tokens":0}}}`, model)
}

func responseEvents(model string) []string {
	ev := func(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }
	created := fmt.Sprintf(`{"id":"resp_1","object":"response","created_at":1,"status":"in_progress","model":%q,"output":[],"usage":null}`, model)
	out := []string{ev("response.created", `{"type":"response.created","sequence_number":0,"response":`+created+`}`)}
	for i, w := range []string{"he", "llo"} {
		out = append(out, ev("response.output_text.delta", fmt.Sprintf(`{"type":"response.output_text.delta","sequence_number":%d,`+
			`"item_id":"msg_1","output_index":0,"content_index":0,"delta":%q,"logprobs":[]}`, i+1, w)))
	}
	return append(out, ev("response.completed", `{"type":"response.completed","sequence_number":3,"response":`+responseJSON(model)+`}`))
}
