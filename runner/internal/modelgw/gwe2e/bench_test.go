package gwe2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/modelgw"
)

// BenchmarkFirstByte is a rough, in-process look at what the gateway adds
// to a streamed call's first byte beside a bare httputil.ReverseProxy to
// the same fake provider (the real server deciding, reserving and settling
// on this machine's Postgres). The figures to report come from
// bench/cmd/modelload on a quiet machine; this one runs on whatever else
// the machine is doing.
func BenchmarkFirstByte(b *testing.B) {
	w := newWorld(b, modelgw.DefaultLimits)
	transport, err := modelgw.ProviderTransport("")
	if err != nil {
		b.Fatal(err)
	}
	transport.TLSClientConfig.InsecureSkipVerify = true // the bare proxy's own way to the test provider
	target, _ := url.Parse(w.provider.URL)
	key := w.provider.Keys["anthropic"]
	bare := &httputil.ReverseProxy{Transport: transport, FlushInterval: -1, Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		pr.Out.Header.Set("X-Api-Key", key)
	}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: bare}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	bareClient, gwClient := &http.Client{}, w.client("s1") // each keeps its connections, as an SDK does
	body := `{"model":"claude-sonnet-4-5","max_tokens":300,"stream":true,"messages":[{"role":"user","content":"say hello"}]}`
	first := func(c *http.Client, base, token string) time.Duration {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/messages", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		if resp.StatusCode != 200 {
			msg, _ := io.ReadAll(resp.Body)
			b.Fatalf("%s: %s", resp.Status, msg)
		}
		var one [1]byte
		io.ReadFull(resp.Body, one[:])
		took := time.Since(start)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return took
	}
	for _, p := range []struct {
		name string
		do   func() time.Duration
	}{
		{"bare", func() time.Duration { return first(bareClient, "http://"+ln.Addr().String(), "") }},
		{"gateway", func() time.Duration { return first(gwClient, base, w.tokens["s1"]) }},
		{"gateway-with-a-budget", func() time.Duration { return first(gwClient, base, w.tokens["s1"]) }},
	} {
		if p.name == "gateway-with-a-budget" {
			// Every call reserves first now (the session's route read again).
			if _, err := w.srv.op.registry.SetModelBudget(context.Background(), &guardv1.SetModelBudgetRequest{Group: w.group,
				Period: guardv1.ModelBudgetPeriod_MODEL_BUDGET_PERIOD_DAY, Tokens: 1 << 40}); err != nil {
				b.Fatal(err)
			}
			w.gw.Close("s1")
			w.tokens["s1"] = w.gw.Open("s1")
		}
		b.Run(p.name, func(b *testing.B) {
			p.do() // warm
			lat := make([]time.Duration, 0, b.N)
			for b.Loop() {
				lat = append(lat, p.do())
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}
