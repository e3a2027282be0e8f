package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// endpoint is a path to the provider: a base URL and the key it takes.
type endpoint struct{ base, token string }

// server is a loopback HTTP server of this program's.
type server struct {
	url string
	srv *http.Server
}

func (s *server) Close() error { return s.srv.Close() }

func serve(h http.Handler) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &server{url: "http://" + ln.Addr().String(), srv: &http.Server{Handler: h}}
	go s.srv.Serve(ln)
	return s, nil
}

// startProvider is the fake provider: a streamed Messages call answered
// with message_start, ?events= text deltas (5 by default) and the end,
// each flushed as written.
func startProvider() (*server, error) {
	delta := []byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hello\"}}\n\n")
	return serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		n := 5
		if v, err := strconv.Atoi(r.Header.Get("Anthropic-Beta")); err == nil {
			n = v // the throughput stream asks for its length here (a header both paths pass)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\","+
			"\"model\":\"claude-sonnet-4-5\",\"content\":[],\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n")
		f.Flush()
		bw := bufio.NewWriterSize(w, 32<<10)
		for i := range n {
			bw.Write(delta)
			if n <= 5 || i%64 == 63 {
				bw.Flush()
				f.Flush()
			}
		}
		bw.WriteString("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":" +
			strconv.Itoa(n) + "}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
		bw.Flush()
		f.Flush()
	}))
}

// startBareProxy is the peer: a bare httputil.ReverseProxy to the provider,
// streaming as the gateway does (FlushInterval -1).
func startBareProxy(target string) (*server, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(u) }, FlushInterval: -1}
	return serve(rp)
}

var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024, IdleConnTimeout: time.Minute}}

const body = `{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"say hello"}]}`

func call(e endpoint, events int) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, e.base+"/v1/messages", bytes.NewReader([]byte(body)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("Authorization", "Bearer "+e.token)
	if events > 0 {
		req.Header.Set("Anthropic-Beta", strconv.Itoa(events))
	}
	resp, err := client.Do(req)
	if err == nil && resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("%s: %s", resp.Status, b)
	}
	return resp, err
}

// firstByte is one streamed call: the time to its first byte of body; the
// rest is read to the end.
func firstByte(e endpoint) (time.Duration, error) {
	start := time.Now()
	resp, err := call(e, 0)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var one [1]byte
	if _, err := io.ReadFull(resp.Body, one[:]); err != nil {
		return 0, err
	}
	took := time.Since(start)
	_, err = io.Copy(io.Discard, resp.Body)
	return took, err
}

// streamRate is one stream of n events, in events per second.
func streamRate(e endpoint, n int) (float64, error) {
	start := time.Now()
	resp, err := call(e, n)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	got := 0
	for sc.Scan() {
		if bytes.HasPrefix(sc.Bytes(), []byte("data: {\"type\":\"content_block_delta\"")) {
			got++
		}
	}
	if err := sc.Err(); err != nil || got != n {
		return 0, fmt.Errorf("read %d of %d events: %v", got, n, err)
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

type result struct {
	lat      []time.Duration
	errors   int
	firstErr error
}

// openLoop makes calls of every path at c.rate each, interleaved (tick i
// runs path i mod len(paths)), each on its own goroutine at its scheduled
// time; the first byte is measured from that time.
func openLoop(c config, paths []endpoint) []result {
	n := len(paths)
	interval := time.Duration(float64(time.Second) / (c.rate * float64(n)))
	total, warm := int((c.warmup+c.duration)/interval), int(c.warmup/interval)
	var (
		mu  sync.Mutex
		res = make([]result, n)
		wg  sync.WaitGroup
	)
	start := time.Now()
	for i := range total {
		at := start.Add(time.Duration(i) * interval)
		time.Sleep(time.Until(at))
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := firstByte(paths[i%n]) // from the call's start: a late tick is the generator's lag, not the path's
			if i < warm {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			r := &res[i%n]
			if err != nil {
				r.errors++
				if r.firstErr == nil {
					r.firstErr = err
				}
				return
			}
			r.lat = append(r.lat, d)
		}()
	}
	wg.Wait()
	for p := range res {
		sort.Slice(res[p].lat, func(a, b int) bool { return res[p].lat[a] < res[p].lat[b] })
	}
	return res
}

func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(float64(len(sorted)-1)*p/100)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3fms", float64(d)/float64(time.Millisecond)) }

// agentScript is the session's agent: it writes its environment down (the
// gateway's address and its token) and waits.
const agentScript = "#!/bin/sh\nenv > \"$MODELLOAD_ENV\"\nexec sleep 86400\n"

// startRunner starts a runner (process runtime) for the group.
func startRunner(c config, reg guardv1.RegistryClient, dir, id, group string) (func(), error) {
	rt, err := reg.CreateToken(context.Background(), &guardv1.CreateTokenRequest{Kind: guardv1.Principal_PRINCIPAL_RUNNER, Name: id, RunnerId: id})
	if err != nil {
		return nil, fmt.Errorf("runner token: %w", err)
	}
	rtFile, agent := filepath.Join(dir, "runner.token"), filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(rtFile, []byte(rt.GetSecret()), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(agent, []byte(agentScript), 0o755); err != nil {
		return nil, err
	}
	envFile := filepath.Join(dir, "agent.env")
	runner := exec.Command(c.runnerBin, "--server", c.addr, "--token-file", rtFile, "--id", id, "--runtime", "process",
		"--data-dir", filepath.Join(dir, "data"), "--agent-binary", agent, "--agent-env", "MODELLOAD_ENV="+envFile,
		"--log-level", "warn", "--group", group)
	runner.Stderr, runner.Stdout = os.Stderr, os.Stderr
	if err := runner.Start(); err != nil {
		return nil, err
	}
	return func() { runner.Process.Signal(os.Interrupt); runner.Wait() }, nil
}

// agentEndpoint waits for the agent's environment and reads the gateway's
// base URL and the session's token from it.
func agentEndpoint(file string, within time.Duration) (endpoint, error) {
	deadline := time.Now().Add(within)
	for {
		b, err := os.ReadFile(file)
		if err == nil {
			var e endpoint
			for _, line := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(line, "ANTHROPIC_BASE_URL="); ok {
					e.base = v
				}
				if v, ok := strings.CutPrefix(line, "ANTHROPIC_AUTH_TOKEN="); ok {
					e.token = v
				}
			}
			if e.base != "" && e.token != "" {
				return e, nil
			}
			if time.Now().After(deadline) {
				return e, errors.New("the agent's environment has no ANTHROPIC_BASE_URL and ANTHROPIC_AUTH_TOKEN: does this runner serve its sessions the model gateway?")
			}
		}
		if time.Now().After(deadline) {
			return endpoint{}, fmt.Errorf("no agent environment at %s after %s: %v", file, within, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
