package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "agent")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	base := []string{"--token-file", "/t", "--id", "host-1"}
	cases := []struct {
		name  string
		env   map[string]string
		args  []string
		want  string // "" = ok; else a substring of the one-line error
		check func(t *testing.T, c Config)
	}{
		{name: "defaults", args: base, check: func(t *testing.T, c Config) {
			if c.Runtime != "docker" || c.Server != "127.0.0.1:7443" || c.AgentImage == "" {
				t.Fatalf("%+v", c)
			}
		}},
		{name: "missing token file", args: []string{"--id", "x"}, want: "--token-file is required"},
		{name: "bad id", args: []string{"--token-file", "/t", "--id", "has space"}, want: "--id"},
		{name: "bad runtime", args: append(base, "--runtime", "vm"), want: `--runtime "vm"`},
		{name: "process needs binary", args: append(base, "--runtime", "process"), want: "--agent-binary is required"},
		{name: "process binary not executable", args: append(base, "--runtime", "process", "--agent-binary", "/nonexistent"), want: "not an executable"},
		{name: "process ok", args: append(base, "--runtime", "process", "--agent-binary", bin)},
		{name: "bad server", args: append(base, "--server", "nohost"), want: "--server"},
		{name: "bad metrics", args: append(base, "--metrics-listen", "x"), want: "--metrics-listen"},
		{name: "bad duration env", env: map[string]string{"CLAWGUARD_IDLE_AFTER": "soon"}, args: base, want: "CLAWGUARD_IDLE_AFTER"},
		{name: "env twins", env: map[string]string{"CLAWGUARD_RUNNER_TOKEN_FILE": "/e", "CLAWGUARD_RUNNER_ID": "env-id", "CLAWGUARD_RUNNER_GROUP": "a, b", "CLAWGUARD_RUNNER_AGENT_ENV": "X=1"},
			check: func(t *testing.T, c Config) {
				if c.TokenFile != "/e" || c.ID != "env-id" || strings.Join(c.Groups, "|") != "a|b" || c.AgentEnv["X"] != "1" {
					t.Fatalf("%+v", c)
				}
			}},
		{name: "flags win over env", env: map[string]string{"CLAWGUARD_ID": "env-id", "CLAWGUARD_GROUP": "a"},
			args: []string{"--token-file", "/t", "--id", "flag-id", "--group", "g1", "--group", "g2", "--agent-env", "K=V=W"},
			check: func(t *testing.T, c Config) {
				if c.ID != "flag-id" || strings.Join(c.Groups, "|") != "g1|g2" || c.AgentEnv["K"] != "V=W" {
					t.Fatalf("%+v", c)
				}
			}},
		{name: "container caps default to none", args: base, check: func(t *testing.T, c Config) {
			if c.ContainerCPUs != "" || c.ContainerMemory != "" {
				t.Fatalf("caps %q %q, want none", c.ContainerCPUs, c.ContainerMemory)
			}
		}},
		{name: "container caps from env", env: map[string]string{"CLAWGUARD_CONTAINER_CPUS": "2", "CLAWGUARD_CONTAINER_MEMORY": "8g"}, args: base,
			check: func(t *testing.T, c Config) {
				if c.ContainerCPUs != "2" || c.ContainerMemory != "8g" {
					t.Fatalf("caps %q %q", c.ContainerCPUs, c.ContainerMemory)
				}
			}},
		{name: "container caps flags win", env: map[string]string{"CLAWGUARD_CONTAINER_CPUS": "2"}, args: append(base, "--container-cpus", "0.5", "--container-memory", "256m"),
			check: func(t *testing.T, c Config) {
				if c.ContainerCPUs != "0.5" || c.ContainerMemory != "256m" {
					t.Fatalf("caps %q %q", c.ContainerCPUs, c.ContainerMemory)
				}
			}},
		{name: "bad container cpus", args: append(base, "--container-cpus", "two"), want: "--container-cpus"},
		{name: "zero container cpus", args: append(base, "--container-cpus", "0"), want: "--container-cpus"},
		{name: "bad container memory env", env: map[string]string{"CLAWGUARD_CONTAINER_MEMORY": "lots"}, args: base, want: "--container-memory"},
		{name: "container memory below docker's minimum", args: append(base, "--container-memory", "1m"), want: "--container-memory"},
		{name: "bad agent env", args: append(base, "--agent-env", "novalue"), want: "KEY=VALUE"},
		// Issue 42: the gateway's per-session limits are the operator's to see and set.
		{name: "gateway limits default", args: base, check: func(t *testing.T, c Config) {
			if c.Gateway.Rate != 200 || c.Gateway.Burst != 400 || c.Gateway.InFlight != 64 {
				t.Fatalf("gateway limits %+v, want 200/s, 400, 64", c.Gateway)
			}
		}},
		{name: "gateway limits from env and flags", env: map[string]string{"CLAWGUARD_RUNNER_GATEWAY_RATE": "50.5", "CLAWGUARD_RUNNER_GATEWAY_IN_FLIGHT": "9"},
			args: append(base, "--gateway-burst", "70", "--gateway-in-flight", "12"), check: func(t *testing.T, c Config) {
				if c.Gateway.Rate != 50.5 || c.Gateway.Burst != 70 || c.Gateway.InFlight != 12 {
					t.Fatalf("gateway limits %+v", c.Gateway)
				}
			}},
		{name: "bad gateway rate env", env: map[string]string{"CLAWGUARD_RUNNER_GATEWAY_RATE": "fast"}, args: base, want: "CLAWGUARD_RUNNER_GATEWAY_RATE"},
		{name: "zero gateway burst", args: append(base, "--gateway-burst", "0"), want: "--gateway-burst"},
		{name: "negative gateway rate", args: append(base, "--gateway-rate", "-1"), want: "--gateway-rate"},
		{name: "tls cert without key", args: append(base, "--tls-ca", "/ca", "--tls-cert", "/c"), want: "--tls-cert and --tls-key must be given together"},
		{name: "tls cert without ca", args: append(base, "--tls-cert", "/c", "--tls-key", "/k"), want: "need --tls-ca"},
		{name: "mtls", env: map[string]string{"CLAWGUARD_RUNNER_TLS_KEY": "/k"}, args: append(base, "--tls-ca", "/ca", "--tls-cert", "/c", "--tls-server-name", "guard"),
			check: func(t *testing.T, c Config) {
				if c.TLSCA != "/ca" || c.TLSCert != "/c" || c.TLSKey != "/k" || c.TLSServerName != "guard" {
					t.Fatalf("%+v", c)
				}
			}},
		// Issue 33: one name, one meaning. The shared names still work where
		// they mean the same thing to every binary; the runner's own win.
		{name: "shared names of the same meaning", env: map[string]string{"CLAWGUARD_RUNNER_TOKEN_FILE": "/e", "CLAWGUARD_ID": "old-id", "CLAWGUARD_GROUP": "a"},
			check: func(t *testing.T, c Config) {
				if c.ID != "old-id" || strings.Join(c.Groups, "|") != "a" {
					t.Fatalf("%+v", c)
				}
			}},
		{name: "the runner's own name wins", env: map[string]string{"CLAWGUARD_RUNNER_TOKEN_FILE": "/e", "CLAWGUARD_ID": "old-id", "CLAWGUARD_RUNNER_ID": "new-id"},
			check: func(t *testing.T, c Config) {
				if c.ID != "new-id" {
					t.Fatalf("%+v", c)
				}
			}},
		// The README's terminal exports ncl's CLAWGUARD_TOKEN_FILE (the
		// operator token): never taken as the runner's.
		{name: "ncl's token file is not the runner's", env: map[string]string{"CLAWGUARD_TOKEN_FILE": "/operator.token", "CLAWGUARD_RUNNER_ID": "r"},
			want: "CLAWGUARD_TOKEN_FILE is set, but the runner does not read it: it is ncl's (the operator's token); give the runner --token-file or CLAWGUARD_RUNNER_TOKEN_FILE"},
		{name: "the server's certificate is not the runner's", env: map[string]string{"CLAWGUARD_TLS_CERT": "/server.crt", "CLAWGUARD_TLS_KEY": "/server.key"}, args: append(base, "--tls-ca", "/ca"),
			want: "is set, but the runner does not read it"},
		{name: "a flag beside ncl's variable", env: map[string]string{"CLAWGUARD_TOKEN_FILE": "/operator.token"}, args: base,
			check: func(t *testing.T, c Config) {
				if c.TokenFile != "/t" {
					t.Fatalf("token file %q, want the flag's", c.TokenFile)
				}
			}},
		{name: "unknown flag", args: append(base, "--nope"), want: "flag provided but not defined"},
		{name: "stray argument", args: append(base, "extra"), want: "unexpected argument"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			cfg, err := Parse(c.args)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("err = %v, want %q", err, c.want)
			case err != nil && strings.Contains(err.Error(), "\n"):
				t.Fatalf("error is not one line: %q", err)
			}
			if c.check != nil {
				c.check(t, cfg)
			}
		})
	}
}

// Issue 33: a YAML file of settings, keys named as the flags; the command
// line and the runner's environment win over it; ncl's CLAWGUARD_CONFIG
// is not the runner's.
func TestParseReadsAConfigFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runner.yaml")
	body := "token-file: /from-file\nid: file-id\nidle-after: 5m\ngroup: [research, ops]\nagent-env:\n  K: V\nserver: 10.0.0.1:7443\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CLAWGUARD_RUNNER_SERVER", "127.0.0.2:7443")
	t.Setenv("CLAWGUARD_CONFIG", "/ncl/config.yaml") // ncl's: never read
	c, err := Parse([]string{"--config", path, "--id", "flag-id"})
	if err != nil {
		t.Fatal(err)
	}
	if c.TokenFile != "/from-file" || c.ID != "flag-id" || c.IdleAfter.String() != "5m0s" || strings.Join(c.Groups, "|") != "research|ops" ||
		c.AgentEnv["K"] != "V" || c.Server != "127.0.0.2:7443" {
		t.Fatalf("%+v", c)
	}
	t.Setenv("CLAWGUARD_RUNNER_CONFIG", path)
	if c, err := Parse(nil); err != nil || c.TokenFile != "/from-file" {
		t.Fatalf("CLAWGUARD_RUNNER_CONFIG: %+v %v", c, err)
	}
	if err := os.WriteFile(path, []byte("token-file: /t\nid: x\nidle_after: 5m\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(nil); err == nil || !strings.Contains(err.Error(), `line 3: "idle_after" is not a setting`) {
		t.Fatalf("a key that is no flag: %v", err)
	}
}

// The gateway's limits are config-file keys too, named as their flags.
func TestTheGatewayLimitsAreConfigFileKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runner.yaml")
	body := "token-file: /t\nid: r\ngateway-rate: 30\ngateway-burst: 60\ngateway-in-flight: 5\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Parse([]string{"--config", path, "--gateway-in-flight", "6"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Gateway.Rate != 30 || c.Gateway.Burst != 60 || c.Gateway.InFlight != 6 {
		t.Fatalf("gateway limits %+v, want the file's rate and burst and the flag's in-flight", c.Gateway)
	}
}
