// Package config resolves where ncl connects and with which token:
// flags win over CLAWGUARD_* environment variables, which win over the
// selected profile of the config file (~/.config/clawguard/ncl.yaml).
package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// DefaultServer is the address used when nothing else names one.
const DefaultServer = "127.0.0.1:7443"

// Profile is one control plane in the config file.
type Profile struct {
	Server        string `yaml:"server,omitempty"`
	TokenFile     string `yaml:"token_file,omitempty"`
	TLSCA         string `yaml:"tls_ca,omitempty"`
	TLSCert       string `yaml:"tls_cert,omitempty"`
	TLSKey        string `yaml:"tls_key,omitempty"`
	TLSServerName string `yaml:"tls_server_name,omitempty"`
}

// File is the config file: named profiles and the one in use.
type File struct {
	Current  string             `yaml:"current"`
	Profiles map[string]Profile `yaml:"profiles"`
}

// Flags are the values given on the command line; empty means "not given".
type Flags struct {
	ConfigPath    string
	Profile       string
	Server        string
	TokenFile     string
	TLSCA         string
	TLSCert       string
	TLSKey        string
	TLSServerName string
}

// Settings is the resolved connection.
type Settings struct {
	Profile       string // name of the profile used, "" when none
	Server        string
	Token         string // the secret; "" when none was found
	TokenSource   string // where the token came from, for error messages
	TLSCA         string
	TLSCert       string
	TLSKey        string
	TLSServerName string
}

// Getenv reads the environment; tests substitute a map.
type Getenv func(string) string

// ErrNoToken means no token was configured anywhere.
var ErrNoToken = errors.New("no token: set CLAWGUARD_TOKEN or CLAWGUARD_TOKEN_FILE, or token_file in the config profile")

// Resolve merges flags, environment and config file. The token is read
// here (from CLAWGUARD_TOKEN or a token file) but its absence is not an
// error: commands that need the server check Settings.Token.
func Resolve(f Flags, getenv Getenv) (Settings, error) {
	path, explicit := Path(f, getenv)
	file, err := Load(path)
	if err != nil && (explicit || !errors.Is(err, os.ErrNotExist)) {
		return Settings{}, err
	}
	name := first(f.Profile, getenv("CLAWGUARD_PROFILE"))
	var prof Profile
	switch {
	case name != "":
		p, ok := file.Profiles[name]
		if !ok {
			return Settings{}, fmt.Errorf("profile %q not found in %s (have: %s)", name, path, strings.Join(file.names(), ", "))
		}
		prof = p
	case file.Current != "":
		p, ok := file.Profiles[file.Current]
		if !ok {
			return Settings{}, fmt.Errorf("current profile %q not found in %s", file.Current, path)
		}
		name, prof = file.Current, p
	}
	s := Settings{
		Profile:       name,
		Server:        first(f.Server, getenv("CLAWGUARD_SERVER"), prof.Server, DefaultServer),
		TLSCA:         first(f.TLSCA, getenv("CLAWGUARD_TLS_CA"), expandHome(prof.TLSCA, getenv)),
		TLSCert:       first(f.TLSCert, getenv("CLAWGUARD_TLS_CERT"), expandHome(prof.TLSCert, getenv)),
		TLSKey:        first(f.TLSKey, getenv("CLAWGUARD_TLS_KEY"), expandHome(prof.TLSKey, getenv)),
		TLSServerName: first(f.TLSServerName, getenv("CLAWGUARD_TLS_SERVER_NAME"), prof.TLSServerName),
	}
	// Token: --token-file, then CLAWGUARD_TOKEN, then CLAWGUARD_TOKEN_FILE,
	// then the profile's token_file.
	var tokenFile string
	switch {
	case f.TokenFile != "":
		tokenFile, s.TokenSource = f.TokenFile, "--token-file "+f.TokenFile
	case getenv("CLAWGUARD_TOKEN") != "":
		s.Token, s.TokenSource = strings.TrimSpace(getenv("CLAWGUARD_TOKEN")), "CLAWGUARD_TOKEN"
	case getenv("CLAWGUARD_TOKEN_FILE") != "":
		tokenFile, s.TokenSource = getenv("CLAWGUARD_TOKEN_FILE"), "CLAWGUARD_TOKEN_FILE="+getenv("CLAWGUARD_TOKEN_FILE")
	case prof.TokenFile != "":
		tokenFile, s.TokenSource = expandHome(prof.TokenFile, getenv), "token_file of profile "+name
	}
	if tokenFile != "" {
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return Settings{}, fmt.Errorf("read token (%s): %w", s.TokenSource, err)
		}
		s.Token = strings.TrimSpace(string(b))
		if s.Token == "" {
			return Settings{}, fmt.Errorf("token file %s is empty", tokenFile)
		}
	}
	if (s.TLSCert == "") != (s.TLSKey == "") {
		return Settings{}, errors.New("TLS client certificate and key must be given together (--tls-cert and --tls-key)")
	}
	return s, nil
}

// Path is the config file in use: --config, else CLAWGUARD_CONFIG, else
// DefaultPath; explicit says it was named (then it must exist to be read).
func Path(f Flags, getenv Getenv) (path string, explicit bool) {
	if f.ConfigPath != "" {
		return f.ConfigPath, true
	}
	if p := getenv("CLAWGUARD_CONFIG"); p != "" {
		return p, true
	}
	return DefaultPath(getenv), false
}

// Save writes the config file (0600: it names token files), creating its
// directory; the write is atomic (a temporary file renamed over it).
func Save(path string, f File) error {
	b, err := yaml.Marshal(f)
	if err != nil {
		return fmt.Errorf("encode config: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create config dir: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".ncl-*.yaml")
	if err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write config: %w", err)
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("write config: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	return nil
}

// Names lists the profiles, sorted.
func (f File) Names() []string { return f.names() }

// DefaultPath is $XDG_CONFIG_HOME/clawguard/ncl.yaml, else ~/.config/clawguard/ncl.yaml.
func DefaultPath(getenv Getenv) string {
	if x := getenv("XDG_CONFIG_HOME"); x != "" {
		return filepath.Join(x, "clawguard", "ncl.yaml")
	}
	return filepath.Join(getenv("HOME"), ".config", "clawguard", "ncl.yaml")
}

// Load reads a config file; a missing file yields an error wrapping os.ErrNotExist.
func Load(path string) (File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return File{}, fmt.Errorf("read config: %w", err)
	}
	var f File
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true) // a typo in a key should not silently fall back to defaults
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return File{}, fmt.Errorf("parse config %s: %w", path, err)
	}
	return f, nil
}

func (f File) names() []string {
	var out []string
	for n := range f.Profiles {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func expandHome(p string, getenv Getenv) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		return filepath.Join(getenv("HOME"), rest)
	}
	return p
}

func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
