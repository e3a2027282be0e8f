package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// dialer opens a connection to a proxy's listener.
type dialer func() (net.Conn, error)

// connectVia sends CONNECT dest through the proxy and reads its answer.
func connectVia(d dialer, dest string) (net.Conn, *bufio.Reader, error) {
	c, err := d()
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", dest, dest)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	if resp.StatusCode != 200 {
		c.Close()
		return nil, nil, fmt.Errorf("CONNECT: %s", resp.Status)
	}
	return c, br, nil
}

// setup is one connection: CONNECT, 200, one byte there and back.
func setup(d dialer, dest string) error {
	c, br, err := connectVia(d, dest)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Write([]byte{'e'}); err != nil {
		return err
	}
	b, err := br.ReadByte()
	if err != nil || b != 'e' {
		return fmt.Errorf("echo: %q %v", b, err)
	}
	return nil
}

// bulk downloads n bytes through one tunnel and answers MB/s.
func bulk(d dialer, dest string, n int64) (float64, error) {
	c, br, err := connectVia(d, dest)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	var req [9]byte
	req[0] = 'b'
	binary.BigEndian.PutUint64(req[1:], uint64(n))
	start := time.Now()
	if _, err := c.Write(req[:]); err != nil {
		return 0, err
	}
	got, err := io.Copy(io.Discard, br)
	if err != nil || got != n {
		return 0, fmt.Errorf("read %d of %d bytes: %v", got, n, err)
	}
	return float64(n) / 1e6 / time.Since(start).Seconds(), nil
}

// target is the destination both proxies reach: 'e' echoes one byte, 'b'
// and a length streams that many bytes and closes.
type target struct{ ln net.Listener }

func startTarget() (*target, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	chunk := make([]byte, 256<<10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var op [1]byte
				if _, err := io.ReadFull(c, op[:]); err != nil {
					return
				}
				if op[0] == 'e' {
					c.Write(op[:])
					io.Copy(io.Discard, c)
					return
				}
				var n [8]byte
				if _, err := io.ReadFull(c, n[:]); err != nil {
					return
				}
				for left := int64(binary.BigEndian.Uint64(n[:])); left > 0; {
					w, err := c.Write(chunk[:min(left, int64(len(chunk)))])
					if err != nil {
						return
					}
					left -= int64(w)
				}
			}()
		}
	}()
	return &target{ln: ln}, nil
}

func (t *target) port() int    { return t.ln.Addr().(*net.TCPAddr).Port }
func (t *target) Close() error { return t.ln.Close() }

// startGuardedPath makes a group whose rule allows the target, a runner
// (process runtime) hosting one session of it with the target's range
// opened, and clawguard-init forwarding a loopback port to the session's
// egress socket, as in a container. It answers the dialer of that port.
func startGuardedPath(ctx context.Context, c config, reg guardv1.RegistryClient, dir string, port int) (dialer, func(), error) {
	stamp := time.Now().UnixNano() % 1e9
	g, err := reg.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: fmt.Sprintf("egressload-%d", stamp)})
	if err != nil {
		return nil, nil, fmt.Errorf("create group: %w", err)
	}
	group := g.GetGroup().GetId()
	if _, err := reg.SetEgressRule(ctx, &guardv1.SetEgressRuleRequest{Group: group, Host: "127.0.0.1", Port: int32(port),
		Effect: guardv1.Effect_EFFECT_ALLOW}); err != nil {
		return nil, nil, fmt.Errorf("egress rule: %w", err)
	}
	runnerID := fmt.Sprintf("egressload-%d", stamp)
	rt, err := reg.CreateToken(ctx, &guardv1.CreateTokenRequest{Kind: guardv1.Principal_PRINCIPAL_RUNNER, Name: runnerID, RunnerId: runnerID})
	if err != nil {
		return nil, nil, fmt.Errorf("runner token: %w", err)
	}
	rtFile := filepath.Join(dir, "runner.token")
	if err := os.WriteFile(rtFile, []byte(rt.GetSecret()), 0o600); err != nil {
		return nil, nil, err
	}
	runner := exec.Command(c.runnerBin, "--server", c.addr, "--token-file", rtFile, "--id", runnerID, "--runtime", "process",
		"--data-dir", filepath.Join(dir, "data"), "--agent-binary", c.agentBin, "--log-level", "warn", "--group", group,
		"--egress-allow-cidr", "127.0.0.1/32",
		// The path is measured, not a session's limits.
		"--egress-rate", "1000000", "--egress-burst", "1000000", "--egress-max-open", "65536")
	runner.Stderr, runner.Stdout = os.Stderr, os.Stderr
	if err := runner.Start(); err != nil {
		return nil, nil, err
	}
	stopRunner := func() { runner.Process.Signal(os.Interrupt); runner.Wait() }
	sock, err := waitEgressSocket(ctx, reg, group, runnerID, filepath.Join(dir, "data", "sockets"), 60*time.Second)
	if err != nil {
		stopRunner()
		return nil, nil, err
	}
	listen, err := freeLoopback()
	if err != nil {
		stopRunner()
		return nil, nil, err
	}
	fwd := exec.Command(c.initBin, "--", "sleep", "86400")
	fwd.Env = append(os.Environ(), "CLAWGUARD_EGRESS_SOCKET="+sock, "CLAWGUARD_EGRESS_LISTEN="+listen)
	fwd.Stderr = os.Stderr
	if err := fwd.Start(); err != nil {
		stopRunner()
		return nil, nil, err
	}
	stop := func() { fwd.Process.Signal(os.Interrupt); fwd.Wait(); stopRunner() }
	d := func() (net.Conn, error) { return net.Dial("tcp", listen) }
	if err := waitDial(d, 10*time.Second); err != nil {
		stop()
		return nil, nil, err
	}
	return d, stop, nil
}

// waitEgressSocket waits for the runner's session of the group and its
// egress socket (<session>.egress.sock).
func waitEgressSocket(ctx context.Context, reg guardv1.RegistryClient, group, runnerID, dir string, within time.Duration) (string, error) {
	deadline := time.Now().Add(within)
	for {
		resp, err := reg.ListSessions(ctx, &guardv1.ListSessionsRequest{Group: group, RunnerId: runnerID})
		if err == nil && len(resp.GetSessions()) > 0 {
			sock := filepath.Join(dir, resp.GetSessions()[0].GetId()+".egress.sock")
			if _, err := os.Stat(sock); err == nil {
				return sock, nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no egress socket of group %s on runner %s after %s (%v)", group, runnerID, within, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func freeLoopback() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func waitDial(d dialer, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		c, err := d()
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startSquid runs Squid on a free loopback port allowing CONNECT to the
// target (the same rule the group has) and nothing else, no cache, no log.
func startSquid(bin, dir string, port int) (dialer, func(), error) {
	listen, err := freeLoopback()
	if err != nil {
		return nil, nil, err
	}
	sdir := filepath.Join(dir, "squid")
	if err := os.MkdirAll(sdir, 0o777); err != nil {
		return nil, nil, err
	}
	os.Chmod(sdir, 0o777)
	conf := strings.Join([]string{
		"http_port " + listen,
		fmt.Sprintf("acl target dst 127.0.0.1/32\nacl target_port port %d", port),
		"acl CONNECT method CONNECT",
		"http_access allow CONNECT target target_port",
		"http_access deny all",
		"cache deny all", "cache_mem 0 MB", "access_log none", "cache_log " + filepath.Join(sdir, "cache.log"),
		"pid_filename " + filepath.Join(sdir, "squid.pid"), "coredump_dir " + sdir,
		"shutdown_lifetime 0 seconds", "pinger_enable off",
	}, "\n") + "\n"
	cf := filepath.Join(sdir, "squid.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(bin, "-N", "-f", cf)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("squid: %w (apt-get install squid)", err)
	}
	stop := func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }
	d := func() (net.Conn, error) { return net.Dial("tcp", listen) }
	if err := waitDial(d, 15*time.Second); err != nil {
		stop()
		return nil, nil, fmt.Errorf("squid did not listen on %s: %w", listen, err)
	}
	return d, stop, nil
}

type result struct {
	lat      []time.Duration
	errors   int
	firstErr error
}

// openLoop issues connections of every path at c.rate each, interleaved
// (tick i runs path i mod len(paths)), each on its own goroutine at its
// scheduled time, and measures from that time.
func openLoop(c config, paths []func() error) []result {
	n := len(paths)
	interval := time.Duration(float64(time.Second) / (c.rate * float64(n)))
	total := int((c.warmup + c.duration) / interval)
	warm := int(c.warmup / interval)
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
			err := paths[i%n]()
			took := time.Since(at)
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
			r.lat = append(r.lat, took)
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
