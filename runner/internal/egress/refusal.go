package egress

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Headers of the proxy's own answers: what happened, and the hold to wait for.
const (
	HeaderOutcome = "X-Clawguard-Egress"
	HeaderHold    = "X-Clawguard-Hold"
)

// refused is a connection the proxy answers itself instead of opening it.
type refused struct {
	status  int    // 400, 403, 429, 502, 503, 504
	outcome string // a metric outcome (Outcomes)
	text    string // the whole sentence the agent reads
	holdID  string
	retry   time.Duration
}

func (r *refused) Error() string { return r.text }

// write sends the answer and ends the exchange (Connection: close). The
// body is the text, one line, so curl -v and an SDK's error both show it.
func (r *refused) write(w io.Writer) error {
	body := "clawguard: " + r.text + "\n"
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", r.status, http.StatusText(r.status))
	fmt.Fprintf(&b, "Content-Type: text/plain; charset=utf-8\r\n%s: %s\r\n", HeaderOutcome, r.outcome)
	if r.holdID != "" {
		fmt.Fprintf(&b, "%s: %s\r\n", HeaderHold, r.holdID)
	}
	if r.retry > 0 {
		fmt.Fprintf(&b, "Retry-After: %d\r\n", max(1, int(r.retry.Round(time.Second)/time.Second)))
	}
	fmt.Fprintf(&b, "Content-Length: %s\r\nConnection: close\r\n\r\n%s", strconv.Itoa(len(body)), body)
	_, err := io.WriteString(w, b.String())
	return err
}

func badRequest(err error) *refused {
	return &refused{status: http.StatusBadRequest, outcome: "invalid", text: err.Error()}
}
