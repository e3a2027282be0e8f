package config

import (
	"fmt"
	"strconv"

	"github.com/clawguard/clawguard/runner/internal/modelgw"
)

// Models is the model gateway (runner/internal/modelgw): the CA roots it
// trusts for providers, and its bounds.
type Models struct {
	// CAFile is a bundle of CA roots the gateway trusts for providers,
	// beside the system's ("" = the system's alone).
	CAFile string
	Limits modelgw.Limits
}

// defineModels is the table of the model gateway's flags.
func (p *parser) defineModels(c *Config) {
	p.str(&c.Models.CAFile, "model-ca-file", "CA roots the model gateway trusts for providers, beside the system's (a provider behind a private CA)")
	l := &c.Models.Limits
	p.dur(&l.HoldWait, "model-hold-wait", "how long a held model call waits for its approval before 429 names the hold")
	p.int64(&l.DefaultOutput, "model-default-output", "output bound written into a model call that sets none (what its reservation counts)")
	p.int64(&l.MaxOutput, "model-max-output", "the largest output bound a model call may set")
	p.int64(&l.MaxBody, "model-max-body", "the largest model call body, in bytes")
	p.dur(&l.RouteTTL, "model-route-ttl", "how long a session's provider route is kept (a rotated key or a new budget is used within it)")
}

func (p *parser) int64(v *int64, name, usage string) {
	if e, from, ok := lookupEnv(name); ok {
		n, err := strconv.ParseInt(e, 10, 64)
		if err != nil {
			p.envErrs = append(p.envErrs, fmt.Sprintf("%s=%q: not a whole number", from, e))
		}
		*v = n
	}
	p.fs.Int64Var(v, name, *v, usage+" ["+EnvName(name)+"]")
}

// validateModels checks the model gateway's settings.
func (c Config) validateModels() error {
	if err := c.Models.Limits.Validate(); err != nil {
		return fmt.Errorf("--model-*: %v", err)
	}
	return nil
}
