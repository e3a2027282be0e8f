package docker

import (
	"strings"
	"testing"
)

// groupDockerfile: what a group image build runs, by base image kind.
func TestGroupDockerfile(t *testing.T) {
	m := Manifest{Apt: []string{"hello", "jq"}, Npm: []string{"@scope/tool"}}
	cases := []struct {
		name     string
		m        Manifest
		user     string
		pm       packageManagers
		want     []string // lines in order
		not      []string
		errorHas string
	}{
		{name: "scratch base: recorded only, nothing runs", m: m,
			want: []string{"FROM base:1", "COPY packages.json /etc/clawguard/packages.json"}, not: []string{"RUN", "USER"}},
		{name: "apt and npm installed as root, then back to the base's user", m: m, user: "65534:65534", pm: packageManagers{apt: true, npm: true},
			want: []string{"FROM base:1", "USER root",
				"RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends hello jq && rm -rf /var/lib/apt/lists/*",
				"RUN npm install -g @scope/tool", "USER 65534:65534", "COPY packages.json /etc/clawguard/packages.json"}},
		{name: "apt only", m: Manifest{Apt: []string{"hello"}}, pm: packageManagers{apt: true},
			want: []string{"USER root", "apt-get install -y --no-install-recommends hello", "COPY"}, not: []string{"npm"}},
		{name: "nothing to install on an apt base: no RUN", m: Manifest{}, pm: packageManagers{apt: true, npm: true},
			want: []string{"FROM base:1", "COPY"}, not: []string{"RUN", "USER"}},
		{name: "npm wanted, base has apt only: refused, not half installed", m: m, pm: packageManagers{apt: true},
			errorHas: "has no npm: the npm packages @scope/tool cannot be installed"},
		{name: "apt wanted, base has npm only", m: Manifest{Apt: []string{"hello"}}, pm: packageManagers{npm: true},
			errorHas: "has no apt-get"},
		{name: "a name that would break out of the RUN line", m: Manifest{Apt: []string{"hello; rm -rf /"}}, pm: packageManagers{apt: true},
			errorHas: "invalid apt package name"},
		{name: "npm option injection", m: Manifest{Npm: []string{"--prefix=/"}}, pm: packageManagers{npm: true},
			errorHas: "invalid npm package name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := groupDockerfile("base:1", c.user, c.m, c.pm)
			if c.errorHas != "" {
				if err == nil || !strings.Contains(err.Error(), c.errorHas) {
					t.Fatalf("err = %v, want %q", err, c.errorHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			rest := got
			for _, w := range c.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("Dockerfile lacks %q (in order):\n%s", w, got)
				}
				rest = rest[i+len(w):]
			}
			for _, n := range c.not {
				if strings.Contains(got, n) {
					t.Fatalf("Dockerfile has %q:\n%s", n, got)
				}
			}
		})
	}
}
