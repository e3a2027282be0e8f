package main

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// admittedMetric is the server's histogram of an admitted decision's time
// from admission (the transport reading the call, or the stream's read loop
// taking the frame) to its answer: the latency admission control steers by,
// without the generator's own lag and client transport.
const admittedMetric = "clawguard_guard_admitted_seconds"

// buckets are a histogram's cumulative counts by upper bound (le), +Inf last.
type buckets struct {
	le    []float64
	count []float64
}

// scrapeBuckets reads metric's buckets from a metrics endpoint (nil when
// unavailable: an older server, or no -metrics).
func scrapeBuckets(url, metric string) *buckets {
	if url == "" {
		return nil
	}
	resp, err := http.Get(url)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	return parseBuckets(resp.Body, metric)
}

// parseBuckets reads an unlabelled histogram from the text exposition
// format (nil when it is absent or not a histogram).
func parseBuckets(exposition io.Reader, metric string) *buckets {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(exposition)
	if err != nil {
		return nil
	}
	f, ok := families[metric]
	if !ok || len(f.GetMetric()) != 1 || f.GetMetric()[0].GetHistogram() == nil {
		return nil
	}
	h := f.GetMetric()[0].GetHistogram()
	b := &buckets{}
	for _, bk := range h.GetBucket() {
		b.le = append(b.le, bk.GetUpperBound())
		b.count = append(b.count, float64(bk.GetCumulativeCount()))
	}
	if n := len(b.le); n == 0 || !math.IsInf(b.le[n-1], 1) {
		// An exposition without the +Inf bucket: it is the sample count.
		b.le = append(b.le, math.Inf(1))
		b.count = append(b.count, float64(h.GetSampleCount()))
	}
	return b
}

// since is what was observed between an earlier scrape and b (nil if
// either is missing or their buckets differ).
func (b *buckets) since(earlier *buckets) *buckets {
	if b == nil || earlier == nil || len(b.le) != len(earlier.le) {
		return nil
	}
	d := &buckets{le: b.le, count: make([]float64, len(b.count))}
	for i := range b.count {
		if b.le[i] != earlier.le[i] {
			return nil
		}
		d.count[i] = b.count[i] - earlier.count[i]
	}
	return d
}

func (b *buckets) total() float64 {
	if b == nil || len(b.count) == 0 {
		return 0
	}
	return b.count[len(b.count)-1]
}

// quantile interpolates linearly within the bucket holding q, as
// Prometheus's histogram_quantile does (the top finite bound when q falls
// in +Inf).
func (b *buckets) quantile(q float64) time.Duration {
	n := b.total()
	if n == 0 {
		return 0
	}
	rank := q * n
	lower, below := 0.0, 0.0
	for i, le := range b.le {
		if b.count[i] >= rank {
			if math.IsInf(le, 1) {
				return seconds(lower)
			}
			in := b.count[i] - below
			if in <= 0 {
				return seconds(le)
			}
			return seconds(lower + (le-lower)*(rank-below)/in)
		}
		lower, below = le, b.count[i]
	}
	return seconds(lower)
}

// within is the share of observations at or under bound, which must be a
// bucket's upper bound (exact, where a quantile is interpolated).
func (b *buckets) within(bound float64) (float64, bool) {
	n := b.total()
	if n == 0 {
		return 0, false
	}
	for i, le := range b.le {
		if le == bound {
			return b.count[i] / n, true
		}
	}
	return 0, false
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// admittedSummary is the server's view of the measured period's admitted
// decisions: how many, p50 / p99, and the share answered within 25 ms
// (issue 16's goal past the limit: p99 of admitted decisions <= 25 ms).
type admittedSummary struct {
	N        float64
	P50, P99 time.Duration
	Within25 float64 // share answered within 25 ms; -1 when the buckets have no 25 ms bound
}

func summarizeAdmitted(d *buckets) *admittedSummary {
	if d.total() == 0 {
		return nil
	}
	s := &admittedSummary{N: d.total(), P50: d.quantile(0.50), P99: d.quantile(0.99), Within25: -1}
	if w, ok := d.within(0.025); ok {
		s.Within25 = w
	}
	return s
}

func (s *admittedSummary) String() string {
	if s == nil {
		return ""
	}
	out := fmt.Sprintf("%.2f / %.2f", ms(s.P50), ms(s.P99))
	if s.Within25 >= 0 {
		out += fmt.Sprintf(" (%.1f %% ≤ 25)", 100*s.Within25)
	}
	return out
}
