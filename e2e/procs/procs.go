// Package procs runs the system's real programs in end-to-end tests: the
// binaries built once from this tree the way `make build` builds them, each
// program with its own log, stopped (or killed, as a crash) by the test.
// The e2e and e2e/faults suites share it.
package procs

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Bins builds the programs into a temporary directory once per test binary.
type Bins struct {
	root, dir string
	once      sync.Once
	out       []byte
	err       error
}

// NewBins prepares a build from the workspace at root (relative to the
// test's directory); Close removes the binaries.
func NewBins(root string) (*Bins, error) {
	dir, err := os.MkdirTemp("", "clawguard-e2e-bin-")
	if err != nil {
		return nil, err
	}
	return &Bins{root: root, dir: dir}, nil
}

// Close removes the built binaries.
func (b *Bins) Close() { _ = os.RemoveAll(b.dir) }

// Path is one program's binary (clawguard-server, clawguard-runner, ncl,
// demo-agent), built on first use (static, trimmed paths, so the build
// cache of `make build` is reused).
func (b *Bins) Path(t testing.TB, name string) string {
	t.Helper()
	b.once.Do(func() {
		cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-o", b.dir+string(filepath.Separator),
			"./server/cmd/clawguard-server", "./runner/cmd/clawguard-runner", "./cli/cmd/ncl", "./runner/agent/demo")
		cmd.Dir = b.root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		b.out, b.err = cmd.CombinedOutput()
	})
	if b.err != nil {
		t.Fatalf("go build the binaries: %v\n%s", b.err, b.out)
	}
	if name == "demo-agent" {
		name = "demo" // go build names the binary after its directory
	}
	return filepath.Join(b.dir, name)
}

// Proc is one program of the system, its output in a log file.
type Proc struct {
	Name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
}

// Start runs a program, configured by its flags (and env) only, until the
// test ends: SIGTERM, then SIGKILL after 15 s. On failure the last tailLines
// lines of its log are printed.
func Start(t testing.TB, name string, env []string, tailLines int, argv ...string) *Proc {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(CleanEnv(), env...)
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	p := &Proc{Name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); f.Close(); close(p.done) }()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("--- %s log (last %d lines) ---\n%s", name, tailLines, p.Tail(tailLines))
		}
	})
	return p
}

// Pid is the program's process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the program has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop asks the program to shut down (SIGTERM) and kills it if it does not
// within 15 s.
func (p *Proc) Stop() {
	if p.Exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		p.Kill()
	}
}

// Kill ends the program at once (a crash, not a shutdown).
func (p *Proc) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Tail is the last n lines of the program's log.
func (p *Proc) Tail(n int) string {
	b, _ := os.ReadFile(p.logPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// CleanEnv is this process's environment without CLAWGUARD_* settings, so
// programs are configured by their flags only.
func CleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CLAWGUARD_") {
			env = append(env, kv)
		}
	}
	return env
}

// WaitFor polls cond every tick until it holds or timeout passes; cond's
// string says what it saw last, for the failure message.
func WaitFor(t testing.TB, timeout, tick time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tk := time.NewTicker(tick)
	defer tk.Stop()
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last seen: %s", timeout, what, last)
		}
		<-tk.C
	}
}

// FreePort is a TCP port free on every address of this network namespace.
func FreePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// Loopback is a free address on 127.0.0.1.
func Loopback(t testing.TB) string { return net.JoinHostPort("127.0.0.1", FreePort(t)) }
