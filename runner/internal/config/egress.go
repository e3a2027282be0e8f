package config

import (
	"fmt"
	"net"

	"github.com/clawguard/clawguard/runner/internal/egress"
	rt "github.com/clawguard/clawguard/runner/internal/runtime"
)

// Egress is an agent's way out (runner/internal/egress): the ranges the
// operator opened on this runner and the per-session bounds.
type Egress struct {
	// AllowCIDRs are ranges an agent may reach though private or loopback
	// (--egress-allow-cidr): the tests open 127.0.0.1/32.
	AllowCIDRs []string
	// DNS is the server (host:port) the runner resolves agents' names with
	// ("" = the host's resolver).
	DNS    string
	Limits egress.Limits
}

// AgentTools are what the runner puts in every agent image it builds and
// gives every agent container (docker).
type AgentTools struct {
	// Dir holds clawguard-init and clawguard-mcp ("" = the directory of the
	// runner's own executable, where make build and the runner image put them).
	Dir string
	// CAFile is the CA roots agents trust ("" = the system bundle when there
	// is one; "none" = the image's own).
	CAFile string
	// HomeSize caps the agent's HOME, a tmpfs (e.g. 256m).
	HomeSize string
}

// defineEgress is the table of the egress and agent-tools flags.
func (p *parser) defineEgress(c *Config) {
	if v, _, ok := lookupEnv("egress-allow-cidr"); ok {
		c.Egress.AllowCIDRs = splitList(v)
	}
	allowFlag := false
	p.fs.Func("egress-allow-cidr", "a range (CIDR or address) agents may reach though it is private or loopback; repeatable ["+EnvName("egress-allow-cidr")+", comma-separated]", func(v string) error {
		if !allowFlag {
			c.Egress.AllowCIDRs, allowFlag = nil, true
		}
		c.Egress.AllowCIDRs = append(c.Egress.AllowCIDRs, v)
		return nil
	})
	p.str(&c.Egress.DNS, "egress-dns", "DNS server (host:port) that resolves agents' destinations (empty = the host's resolver)")
	l := &c.Egress.Limits
	p.dur(&l.HoldWait, "egress-hold-wait", "how long a held connection waits for its approval before 403 names the hold")
	p.int(&l.MaxOpen, "egress-max-open", "connections one session may have open at once")
	p.float(&l.Rate, "egress-rate", "new connections a second one session may open")
	p.int(&l.Burst, "egress-burst", "new connections one session may open at once, above --egress-rate")
	p.dur(&l.Idle, "egress-idle", "close a connection after this long with no byte either way")
	p.dur(&l.MaxDuration, "egress-max-duration", "close any connection this long after it opened")
	p.dur(&l.DialTimeout, "egress-dial-timeout", "bound on resolving and connecting to a destination")
	p.str(&c.Tools.Dir, "agent-tools-dir", "directory holding clawguard-init and clawguard-mcp for agent images (empty = the runner's own directory)")
	p.str(&c.Tools.CAFile, "agent-ca-file", "CA roots agents trust, put in every agent image (empty = the system bundle; none = the image's own)")
	p.str(&c.Tools.HomeSize, "agent-home-size", "docker: size of the agent's HOME, a tmpfs")
}

// validateEgress checks the egress and agent-tools settings.
func (c Config) validateEgress() error {
	if _, err := egress.ParseAllowed(c.Egress.AllowCIDRs); err != nil {
		return err
	}
	if c.Egress.DNS != "" {
		if _, _, err := net.SplitHostPort(c.Egress.DNS); err != nil {
			return fmt.Errorf("--egress-dns %q: want host:port", c.Egress.DNS)
		}
	}
	if err := c.Egress.Limits.Validate(); err != nil {
		return fmt.Errorf("--egress-*: %v", err)
	}
	if n, err := rt.ParseMemory(c.Tools.HomeSize); err != nil || n <= 0 {
		return fmt.Errorf("--agent-home-size %q: want a size such as 256m", c.Tools.HomeSize)
	}
	return nil
}
