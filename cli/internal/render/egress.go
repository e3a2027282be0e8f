package render

import (
	"strconv"

	"github.com/clawguard/clawguard/proto/egressrule"
	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// A group's egress rules (ncl egress list): one row a rule; a rule with no
// host is the group's default, the last row.
func init() {
	register[*guardv1.EgressRule](view{
		cols: []col{
			c("HOST", func(r *guardv1.EgressRule) string {
				if r.GetHost() == "" {
					return "(any other destination)"
				}
				return r.GetHost()
			}),
			c("PORTS", func(r *guardv1.EgressRule) string {
				switch {
				case r.GetHost() == "":
					return "any"
				case r.GetPort() == 0:
					return "443, 80"
				}
				return strconv.Itoa(int(r.GetPort()))
			}),
			c("EFFECT", func(r *guardv1.EgressRule) string {
				if r.GetHost() == "" && r.GetEffect() == guardv1.Effect_EFFECT_UNSPECIFIED {
					return egressrule.EffectHold + " (the default; not set)"
				}
				if r.GetHost() == "" {
					return enumword.String(r.GetEffect()) + " (the group's default)"
				}
				return enumword.String(r.GetEffect())
			}),
		},
		id: idOf(func(r *guardv1.EgressRule) string {
			if r.GetPort() == 0 {
				return r.GetHost()
			}
			return egressrule.Destination(r.GetHost(), int(r.GetPort()))
		}),
	})
}
