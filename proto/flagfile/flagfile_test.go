package flagfile

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func write(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func envName(f string) string {
	return "FLAGFILE_TEST_" + strings.ToUpper(strings.ReplaceAll(f, "-", "_"))
}

// The file sets what neither the command line nor the environment did.
func TestFlagsBeatEnvBeatsFileBeatsDefaults(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	listen := fs.String("listen", "default", "")
	level := fs.String("log-level", "info", "")
	wait := fs.Duration("decide-wait", time.Second, "")
	auto := fs.Bool("auto-migrate", false, "")
	var groups list
	fs.Var(&groups, "group", "")
	var env list
	fs.Var(&env, "agent-env", "")
	t.Setenv(envName("log-level"), "warn") // the environment wins over the file
	*level = "warn"                        // as a binary's env twin sets the default
	if err := fs.Parse([]string{"--listen", "flag"}); err != nil {
		t.Fatal(err)
	}
	path := write(t, "listen: file\nlog-level: debug\ndecide-wait: 45s\nauto-migrate: true\ngroup: [research, ops]\nagent-env:\n  A: \"1\"\n")
	if err := Apply(fs, path, fromEnv); err != nil {
		t.Fatal(err)
	}
	if *listen != "flag" || *level != "warn" || *wait != 45*time.Second || !*auto || groups.String() != "research,ops" || env.String() != "A=1" {
		t.Fatalf("listen %q level %q wait %s auto %v groups %v env %v", *listen, *level, *wait, *auto, groups, env)
	}
}

// A key that is no flag, a value a flag refuses, or an empty value refuses
// the file, naming its line.
func TestAFileThatSaysSomethingUnclearIsRefused(t *testing.T) {
	for body, want := range map[string]string{
		"listen: x\nlisen: y\n": `line 2: "lisen" is not a setting`,
		"decide-wait: soon\n":   "line 1: decide-wait",
		"listen:\n":             "no value",
		"config: other.yaml\n":  "not a setting",
		"listen: [\n":           "yaml",
	} {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.String("listen", "", "")
		fs.Duration("decide-wait", 0, "")
		fs.String("config", "", "")
		err := Apply(fs, write(t, body), fromEnv)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", body, err, want)
		}
	}
	if err := Apply(flag.NewFlagSet("x", flag.ContinueOnError), "", fromEnv); err != nil {
		t.Errorf("no file: %v", err)
	}
	if err := Apply(flag.NewFlagSet("x", flag.ContinueOnError), "/nonexistent/c.yaml", fromEnv); err == nil {
		t.Error("a missing file was accepted")
	}
}

func fromEnv(f string) bool { _, ok := os.LookupEnv(envName(f)); return ok }
