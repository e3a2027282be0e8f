package modelgw

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/clawguard/clawguard/proto/modelrule"
)

// Headers of the gateway's own answers: what happened, and the hold to wait
// for (the egress proxy's names).
const (
	HeaderOutcome = "X-Clawguard-Model"
	HeaderHold    = "X-Clawguard-Hold"
)

// refusal is a call the gateway answers itself, in the error shape of the
// provider's API, so the agent's SDK raises an error it can read: a status
// it treats right (403 is final, 429 and 503/529 are retried, after
// Retry-After) and the whole sentence in the message.
type refusal struct {
	status  int
	outcome string // the metric outcome (Outcomes)
	typ     string // the provider's error type; "" = by status
	text    string
	holdID  string
	retry   time.Duration
}

func (r *refusal) Error() string { return r.text }

// anthropicTypes and openaiTypes are each API's error type by status.
var anthropicTypes = map[int]string{
	400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
	405: "invalid_request_error", 413: "request_too_large", 429: "rate_limit_error", 502: "api_error", 503: "api_error",
	529: "overloaded_error",
}

var openaiTypes = map[int]string{
	400: "invalid_request_error", 401: "invalid_request_error", 403: "permission_error", 404: "invalid_request_error",
	405: "invalid_request_error", 413: "invalid_request_error", 429: "rate_limit_error", 502: "server_error", 503: "server_error",
}

// openaiCodes are OpenAI's error codes the SDKs and agents know.
var openaiCodes = map[int]string{401: "invalid_api_key", 404: "unknown_url", 413: "request_too_large", 429: "rate_limit_exceeded"}

// write answers the refusal in kind's shape. A retryable one says when to
// come back (Retry-After, and x-should-retry, which the Stainless SDKs of
// both providers honour); a final one says not to.
func (r *refusal) write(w http.ResponseWriter, kind string) {
	status := r.status
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set(HeaderOutcome, r.outcome)
	if r.holdID != "" {
		h.Set(HeaderHold, r.holdID)
	}
	retry := status == http.StatusTooManyRequests || status >= 500
	h.Set("x-should-retry", strconv.FormatBool(retry))
	if r.retry > 0 {
		h.Set("Retry-After", strconv.Itoa(max(1, int(r.retry.Round(time.Second)/time.Second))))
	}
	msg := "clawguard: " + r.text
	var body any
	if kind == modelrule.KindAnthropic {
		if status == http.StatusServiceUnavailable {
			status = 529 // Anthropic's "overloaded": retried by its SDK and by Claude Code
		}
		typ := r.typ
		if typ == "" {
			typ = anthropicTypes[status]
		}
		body = map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}}
	} else {
		typ := r.typ
		if typ == "" {
			typ = openaiTypes[status]
		}
		e := map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}
		if c, ok := openaiCodes[status]; ok {
			e["code"] = c
		}
		body = map[string]any{"error": e}
	}
	b, _ := json.Marshal(body)
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

func invalid(format string, args ...any) *refusal {
	return &refusal{status: http.StatusBadRequest, outcome: "invalid", text: fmt.Sprintf(format, args...)}
}
