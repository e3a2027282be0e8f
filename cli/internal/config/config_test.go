package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func env(m map[string]string) Getenv { return func(k string) string { return m[k] } }

func TestPrecedence(t *testing.T) {
	home := t.TempDir()
	write(t, home, "file.token", "from-profile\n")
	flagTok := write(t, home, "flag.token", "from-flag")
	envTok := write(t, home, "env.token", "from-env-file")
	if err := os.MkdirAll(filepath.Join(home, ".config", "clawguard"), 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(home, ".config", "clawguard"), "ncl.yaml",
		"current: local\nprofiles:\n  local: {server: file:1, token_file: ~/file.token, tls_ca: ~/ca.pem}\n  prod: {server: prod:443}\n")

	cases := []struct {
		name              string
		flags             Flags
		env               map[string]string
		server, token, ca string
	}{
		{"profile only", Flags{}, nil, "file:1", "from-profile", filepath.Join(home, "ca.pem")},
		{"env beats profile", Flags{}, map[string]string{"CLAWGUARD_SERVER": "env:2", "CLAWGUARD_TOKEN": "from-env", "CLAWGUARD_TLS_CA": "/env/ca"}, "env:2", "from-env", "/env/ca"},
		{"token env beats token-file env", Flags{}, map[string]string{"CLAWGUARD_TOKEN": "from-env", "CLAWGUARD_TOKEN_FILE": envTok}, "file:1", "from-env", filepath.Join(home, "ca.pem")},
		{"token-file env", Flags{}, map[string]string{"CLAWGUARD_TOKEN_FILE": envTok}, "file:1", "from-env-file", filepath.Join(home, "ca.pem")},
		{"flags beat env", Flags{Server: "flag:3", TokenFile: flagTok, TLSCA: "/flag/ca"}, map[string]string{"CLAWGUARD_SERVER": "env:2", "CLAWGUARD_TOKEN": "from-env"}, "flag:3", "from-flag", "/flag/ca"},
		{"env profile", Flags{}, map[string]string{"CLAWGUARD_PROFILE": "prod", "CLAWGUARD_TOKEN": "t"}, "prod:443", "t", ""},
		{"flag profile beats env profile", Flags{Profile: "local"}, map[string]string{"CLAWGUARD_PROFILE": "prod"}, "file:1", "from-profile", filepath.Join(home, "ca.pem")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := map[string]string{"HOME": home}
			for k, v := range c.env {
				m[k] = v
			}
			s, err := Resolve(c.flags, env(m))
			if err != nil {
				t.Fatal(err)
			}
			if s.Server != c.server || s.Token != c.token || s.TLSCA != c.ca {
				t.Errorf("got server %q token %q ca %q; want %q %q %q", s.Server, s.Token, s.TLSCA, c.server, c.token, c.ca)
			}
		})
	}
}

func TestDefaultsWithoutConfigFile(t *testing.T) {
	s, err := Resolve(Flags{}, env(map[string]string{"HOME": t.TempDir()}))
	if err != nil {
		t.Fatal(err)
	}
	if s.Server != DefaultServer || s.Token != "" || s.Profile != "" {
		t.Errorf("defaults = %+v", s)
	}
}

func TestErrors(t *testing.T) {
	dir := t.TempDir()
	empty := write(t, dir, "empty.token", "  \n")
	typo := write(t, dir, "typo.yaml", "profiles:\n  a: {sever: x:1}\n")
	badCurrent := write(t, dir, "cur.yaml", "current: gone\nprofiles: {}\n")
	cases := []struct {
		name  string
		flags Flags
		env   map[string]string
		want  string
	}{
		{"explicit config missing", Flags{ConfigPath: filepath.Join(dir, "nope.yaml")}, nil, "no such file"},
		{"env config missing", Flags{}, map[string]string{"CLAWGUARD_CONFIG": filepath.Join(dir, "nope.yaml")}, "no such file"},
		{"unknown key", Flags{ConfigPath: typo}, nil, "sever"},
		{"current profile missing", Flags{ConfigPath: badCurrent}, nil, `current profile "gone"`},
		{"named profile missing", Flags{ConfigPath: badCurrent, Profile: "b"}, nil, `profile "b" not found`},
		{"empty token file", Flags{TokenFile: empty}, nil, "empty"},
		{"missing token file", Flags{TokenFile: filepath.Join(dir, "none")}, nil, "read token (--token-file"},
		{"cert without key", Flags{TLSCert: "c.pem"}, nil, "together"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := map[string]string{"HOME": dir}
			for k, v := range c.env {
				m[k] = v
			}
			_, err := Resolve(c.flags, env(m))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want one containing %q", err, c.want)
			}
		})
	}
}
