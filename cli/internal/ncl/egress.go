package ncl

import (
	"context"
	"net"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/proto/egressrule"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// ncl egress: a group's rules for its agents' outbound connections. Every
// new connection an agent opens is a net.connect decision on its
// destination; these rules decide it (the most restrictive rule naming the
// destination answers), and a destination no rule names gets the group's
// default (hold when none is set).
func (a *app) egressCmd() *cobra.Command {
	return noun("egress", "A group's egress rules: which destinations its agents may connect to",
		"  ncl egress list --group research\n  ncl egress set --group research --host '*.github.com' --effect allow",
		a.egressList(), a.egressSet(), a.egressUnset(), a.egressDefault())
}

func (a *app) egressList() *cobra.Command {
	var group string
	cmd := &cobra.Command{
		Use: "list", Short: "List a group's egress rules and its default",
		Example: "  ncl egress list --group research\n  ncl egress list --group research -o json", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.groupArgs(&group)
			return a.do(cmd, func(ctx context.Context, c *clients) error {
				resp, err := c.reg.GetEgressPolicy(ctx, &guardv1.GetEgressPolicyRequest{Group: group})
				if err != nil {
					return err
				}
				pol := resp.GetPolicy()
				if a.structured() {
					return a.printer().Object(pol)
				}
				rows := make([]proto.Message, 0, len(pol.GetRules())+1)
				for _, r := range pol.GetRules() {
					rows = append(rows, r)
				}
				if !a.quiet {
					rows = append(rows, &guardv1.EgressRule{Effect: pol.GetDefaultEffect()})
				}
				return a.printer().List(&guardv1.EgressRule{}, rows)
			})
		},
	}
	cmd.Flags().StringVar(&group, "group", "", "agent group (name or id)")
	required(cmd, "group")
	return cmd
}

func (a *app) egressSet() *cobra.Command {
	var group, host, effect string
	cmd := &cobra.Command{
		Use: "set", Short: "Set the effect of connections to a host (and port)",
		Long: `Set what a connection of the group's agents to HOST gets: allow opens it,
hold asks the group's approvers (the connection waits a short while, then
is refused naming the hold; once approved, the agent connects again), deny
refuses it. HOST is a name ("api.github.com"), every name below a domain
("*.github.com", not github.com itself) or an IP address; with no :PORT the
rule covers 443 and 80. A rule of the same host and port is replaced. Of
the rules naming a destination the most restrictive answers, so a deny
cannot be loosened by another rule. Private, loopback and metadata
addresses are never reachable, whatever a rule says.`,
		Example: "  ncl egress set --group research --host '*.github.com' --effect allow\n" +
			"  ncl egress set --group research --host pypi.org --effect allow\n" +
			"  ncl egress set --group research --host gist.github.com --effect deny\n" +
			"  ncl egress set --group research --host db.example.com:5432 --effect hold", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, port, err := parseHostPort(host)
			if err != nil {
				return err
			}
			e, err := parseMCPEffect(effect)
			if err != nil || e == guardv1.Effect_EFFECT_UNSPECIFIED {
				return usagef("--effect %q: want allow, hold or deny (ncl egress unset removes a rule)", effect)
			}
			a.groupArgs(&group)
			return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
				resp, err := c.reg.SetEgressRule(ctx, &guardv1.SetEgressRuleRequest{Group: group, Host: h, Port: port, Effect: e})
				return ruleOf(resp.GetPolicy(), h, port), err
			})
		},
	}
	cmd.Flags().StringVar(&group, "group", "", "agent group (name or id)")
	cmd.Flags().StringVar(&host, "host", "", "HOST or HOST:PORT (a name, *.domain, or an IP address; [v6]:port)")
	cmd.Flags().StringVar(&effect, "effect", "", "allow, hold or deny")
	required(cmd, "group", "host", "effect")
	return cmd
}

func (a *app) egressUnset() *cobra.Command {
	var group, host string
	cmd := &cobra.Command{
		Use: "unset", Short: "Remove one of a group's egress rules",
		Example: "  ncl egress unset --group research --host gist.github.com", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, port, err := parseHostPort(host)
			if err != nil {
				return err
			}
			a.groupArgs(&group)
			return a.done(cmd, "egress rule "+egressrule.Rule{Host: h, Port: int(port)}.Describe()+" removed", func(ctx context.Context, c *clients) error {
				_, err := c.reg.UnsetEgressRule(ctx, &guardv1.UnsetEgressRuleRequest{Group: group, Host: h, Port: port})
				return err
			})
		},
	}
	cmd.Flags().StringVar(&group, "group", "", "agent group (name or id)")
	cmd.Flags().StringVar(&host, "host", "", "the rule's HOST or HOST:PORT, as set")
	required(cmd, "group", "host")
	return cmd
}

func (a *app) egressDefault() *cobra.Command {
	var group, effect string
	cmd := &cobra.Command{
		Use: "default", Short: "Set what a destination no rule names gets",
		Long: `Set the effect of connections to destinations none of the group's rules
name: hold (the default when none is set: a human is asked about each new
destination), allow, or deny (only the destinations the rules allow are
reachable). --effect none removes the setting.`,
		Example: "  ncl egress default --group research --effect deny", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := parseMCPEffect(effect)
			if err != nil {
				return err
			}
			a.groupArgs(&group)
			return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
				resp, err := c.reg.SetEgressDefault(ctx, &guardv1.SetEgressDefaultRequest{Group: group, Effect: e})
				return &guardv1.EgressRule{Effect: resp.GetPolicy().GetDefaultEffect()}, err
			})
		},
	}
	cmd.Flags().StringVar(&group, "group", "", "agent group (name or id)")
	cmd.Flags().StringVar(&effect, "effect", "", "allow, hold, deny, or none (remove the setting: hold)")
	required(cmd, "group", "effect")
	return cmd
}

// parseHostPort reads --host HOST[:PORT] ([v6]:PORT for an IPv6 address
// with a port; a bare IPv6 address has none). The server checks the host.
func parseHostPort(s string) (string, int32, error) {
	s = strings.TrimSpace(s)
	host, portText, err := net.SplitHostPort(s)
	if err != nil {
		if strings.HasPrefix(s, "[") || strings.Count(s, ":") == 1 {
			return "", 0, usagef("--host %q: want HOST or HOST:PORT", s)
		}
		return s, 0, nil // no port, or a bare IPv6 address
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, usagef("--host %q: the port must be 1 to 65535", s)
	}
	return host, int32(port), nil
}

// ruleOf is the rule of host and port in the policy as the server stored
// it (normalised), else the first rule.
func ruleOf(p *guardv1.EgressPolicy, host string, port int32) *guardv1.EgressRule {
	norm, err := egressrule.NormalizePattern(host)
	for _, r := range p.GetRules() {
		if err == nil && r.GetHost() == norm && r.GetPort() == port {
			return r
		}
	}
	return &guardv1.EgressRule{Host: host, Port: port}
}
