package compose

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// guideLines are the command lines of deploy/THREE-HOSTS.md's code blocks,
// in order, comments and continuation backslashes stripped.
func guideLines(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("../THREE-HOSTS.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			in = !in
			continue
		}
		if !in {
			continue
		}
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i]
		}
		if line = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(line), "\\")); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out
}

// Issue 45: the guide works verbatim. Each command line of THREE-HOSTS.md
// is checked for what a host needs from it: the files it names exist, the
// directories it copies into were made before, keys and tokens are
// installed for the images' uid 0400, ncl flags exist, every image the
// compose files use is carried to the hosts, and what it writes under
// deploy/compose/hosts is git-ignored.
func TestTheThreeHostsGuideNamesWhatExists(t *testing.T) {
	lines := guideLines(t)
	made := map[string]bool{}
	yml := regexp.MustCompile(`\b([a-z-]+\.yml)\b`)
	for _, l := range lines {
		for _, m := range yml.FindAllStringSubmatch(l, -1) {
			if _, err := os.Stat(filepath.Join("hosts", m[1])); err != nil && !strings.Contains(l, "helm") {
				t.Errorf("%q names %s, which deploy/compose/hosts does not have", l, m[1])
			}
		}
		if strings.Contains(l, "mkdir") || strings.Contains(l, "install -d") {
			for _, d := range []string{"tls", "secrets", "bridge-state"} {
				if strings.Contains(l, d) {
					made[d] = true
				}
			}
		}
		if strings.HasPrefix(l, "sudo install") && !strings.Contains(l, "install -d") {
			dst := strings.Fields(l)[len(strings.Fields(l))-1]
			dir := strings.SplitN(dst, "/", 2)[0]
			if !made[dir] {
				t.Errorf("%q copies into %s/ before any command makes it", l, dir)
			}
			if (strings.HasSuffix(dst, ".key") || dir == "secrets") && (!strings.Contains(l, "-o 65532 -g 65532") || !strings.Contains(l, "-m 0400")) {
				t.Errorf("%q: a key or token must be installed for the images' uid 65532, mode 0400", l)
			}
		}
		if strings.HasPrefix(l, "ncl ") {
			checkNclFlags(t, l)
		}
	}
	// Every secret and TLS file the compose files read is installed by the guide.
	installed := strings.Join(lines, "\n")
	for _, want := range []string{"tls/server.key", "tls/server.crt", "secrets/operator-token", "tls/runner.key", "tls/runner.crt",
		"secrets/runner-token", "tls/bridge.key", "tls/bridge.crt", "~/bridge-token", "~/telegram-bot-token", "tls/ca.crt"} {
		base := filepath.Base(want)
		if !strings.Contains(installed, want) && !strings.Contains(installed, "~/"+base) {
			t.Errorf("the guide never puts %s on its host", want)
		}
	}
	// Every image of the host files is carried with docker save.
	for _, f := range []string{"postgres.yml", "server.yml", "runner.yml", "bridge.yml"} {
		img := imageOf(t, f)
		found := false
		for _, l := range lines {
			found = found || (strings.Contains(l, "docker save") && strings.Contains(l, img))
		}
		if !found {
			t.Errorf("%s's image %s is in no docker save line: a host with no registry cannot start it", f, img)
		}
	}
	// A group's sessions reach the runner named for them: RUNNER_GROUPS is
	// the runner's --group list.
	data, err := os.ReadFile("hosts/runner.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "CLAWGUARD_RUNNER_GROUP: ${RUNNER_GROUPS:-}") {
		t.Error("runner.yml does not pass RUNNER_GROUPS to the runner's --group (CLAWGUARD_RUNNER_GROUP)")
	}
	for _, p := range []string{"tls/server.key", "secrets/operator-token", "secrets/host3-token", "bridge-state/x", "telegram-bot-token"} {
		if err := exec.Command("git", "check-ignore", "-q", filepath.Join("hosts", p)).Run(); err != nil {
			t.Errorf("deploy/compose/hosts/%s is not git-ignored: a key or token could be committed", p)
		}
	}
}

func imageOf(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("hosts", file))
	if err != nil {
		t.Fatal(err)
	}
	var cf composeFile
	if err := yaml.Unmarshal(data, &cf); err != nil {
		t.Fatal(err)
	}
	for _, s := range cf.Services {
		return s.Image
	}
	t.Fatalf("%s has no service", file)
	return ""
}

// checkNclFlags: every --flag of an ncl line is declared by ncl, and a
// group is created with its name.
func checkNclFlags(t *testing.T, line string) {
	t.Helper()
	src := nclSource(t)
	for _, f := range regexp.MustCompile(`--([a-z][a-z-]*)`).FindAllStringSubmatch(line, -1) {
		if !strings.Contains(src, `"`+f[1]+`"`) {
			t.Errorf("%q: ncl declares no --%s", line, f[1])
		}
	}
	if strings.HasPrefix(line, "ncl groups create") && !strings.Contains(line, "--name") {
		t.Errorf("%q: ncl groups create needs --name", line)
	}
}

var nclSrc string

func nclSource(t *testing.T) string {
	t.Helper()
	if nclSrc == "" {
		files, err := filepath.Glob("../../cli/internal/ncl/*.go")
		if err != nil || len(files) == 0 {
			t.Fatalf("ncl's source: %v", err)
		}
		var b strings.Builder
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(data)
		}
		nclSrc = b.String()
	}
	return nclSrc
}

// The guide's certificate and operator-token commands run as printed: the
// server certificate carries every name, each client certificate the guide
// copies exists and chains to the CA, keys are not world-readable, and the
// operator token is 0600.
func TestTheThreeHostsGuideMakesItsCertificatesAndToken(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Fatalf("openssl is needed to run the guide's certificate script: %v", err)
	}
	dir := t.TempDir()
	hosts := filepath.Join(dir, "deploy", "compose", "hosts")
	if err := os.MkdirAll(hosts, 0o755); err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile("../certs.sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "deploy", "certs.sh"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	var ran int
	for _, l := range guideLines(t) {
		if !strings.HasPrefix(l, "../../certs.sh") && !strings.Contains(l, "> secrets/operator-token") {
			continue
		}
		c := exec.Command("bash", "-ec", l)
		c.Dir = hosts
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("%q: %v\n%s", l, err, out)
		}
		ran++
	}
	if ran != 2 {
		t.Fatalf("ran %d of the guide's certificate and token lines, want 2", ran)
	}
	san, err := exec.Command("openssl", "x509", "-in", filepath.Join(hosts, "tls", "server.crt"), "-noout", "-ext", "subjectAltName").CombinedOutput()
	if err != nil {
		t.Fatalf("server.crt: %v\n%s", err, san)
	}
	for _, n := range []string{"clawguard.example", "host1", "host2"} {
		if !strings.Contains(string(san), "DNS:"+n) {
			t.Errorf("server.crt's SANs %q lack %s", san, n)
		}
	}
	for _, c := range []string{"host3", "host4", "bridge", "operator"} {
		crt := filepath.Join(hosts, "tls", c+".crt")
		if out, err := exec.Command("openssl", "verify", "-CAfile", filepath.Join(hosts, "tls", "ca.crt"), crt).CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", crt, err, out)
		}
		st, err := os.Stat(filepath.Join(hosts, "tls", c+".key"))
		if err != nil || st.Mode().Perm()&0o007 != 0 {
			t.Errorf("%s.key: %v, mode %v; want it unreadable by others", c, err, st.Mode())
		}
	}
	st, err := os.Stat(filepath.Join(hosts, "secrets", "operator-token"))
	if err != nil || st.Mode().Perm() != 0o600 || st.Size() < 32 {
		t.Fatalf("operator-token: %v, mode %v, %d bytes; want 0600 and a secret", err, st.Mode(), st.Size())
	}
}
