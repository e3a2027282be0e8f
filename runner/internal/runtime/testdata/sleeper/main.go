// Command sleeper is the tiny agent the runtime tests run. It records what it
// sees (identity, environment, packages manifest, gateway reachability) in
// $CLAWGUARD_WORKSPACE/started.json, then waits for SIGTERM and writes
// stopped. With the argument "ignore-term" it ignores SIGTERM, so the SIGKILL
// escalation can be tested; with "exit" it exits right after the report.
package main

import (
	"encoding/json"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

type report struct {
	UID      int               `json:"uid"`
	Args     []string          `json:"args"`
	Env      map[string]string `json:"env"`
	Packages string            `json:"packages"`
	Gateway  string            `json:"gateway"`
	RootRW   bool              `json:"root_writable"`
	Cwd      string            `json:"cwd"`
}

func main() {
	ignoreTerm := len(os.Args) > 1 && os.Args[1] == "ignore-term"
	sig := make(chan os.Signal, 1)
	if ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	} else {
		signal.Notify(sig, syscall.SIGTERM)
	}

	ws := os.Getenv("CLAWGUARD_WORKSPACE")
	rep := report{UID: os.Getuid(), Args: os.Args[1:], Env: map[string]string{}}
	for _, k := range []string{"CLAWGUARD_GATEWAY_SOCKET", "CLAWGUARD_WORKSPACE", "CLAWGUARD_SESSION_ID", "CLAWGUARD_GROUP_ID", "EXTRA", "HOME"} {
		if v, ok := os.LookupEnv(k); ok {
			rep.Env[k] = v
		}
	}
	rep.Cwd, _ = os.Getwd()
	if b, err := os.ReadFile("/etc/clawguard/packages.json"); err == nil {
		rep.Packages = string(b)
	}
	if f, err := os.Create("/root-write-probe"); err == nil {
		rep.RootRW = true
		f.Close()
	}
	if c, err := net.DialTimeout("unix", os.Getenv("CLAWGUARD_GATEWAY_SOCKET"), 2*time.Second); err != nil {
		rep.Gateway = "error: " + err.Error()
	} else {
		_, err := c.Write([]byte("hello " + os.Getenv("CLAWGUARD_SESSION_ID") + "\n"))
		c.Close()
		rep.Gateway = "ok"
		if err != nil {
			rep.Gateway = "error: " + err.Error()
		}
	}
	b, _ := json.Marshal(rep)
	write(filepath.Join(ws, "started.json"), b)

	if len(os.Args) > 1 && os.Args[1] == "exit" {
		return
	}
	if ignoreTerm {
		for {
			time.Sleep(time.Hour) // a bare select{} would be a deadlock panic, not a wait
		}
	}
	<-sig
	write(filepath.Join(ws, "stopped"), []byte("stopped\n"))
}

// write writes atomically so a polling test never reads half a file.
func write(path string, b []byte) {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err == nil {
		os.Rename(tmp, path)
	}
}
