package ncl

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/cli/internal/render"
	"github.com/clawguard/clawguard/proto/egressrule"
	"github.com/clawguard/clawguard/proto/enumword"
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

// egressViews are how a group's egress rules print (ncl egress list): one row a
// rule; a rule with no host is the group's default, the last row.
var egressViews = []render.View{
	render.For[*guardv1.EgressRule](render.View{
		Cols: []render.Col{
			render.C("HOST", func(r *guardv1.EgressRule) string {
				if r.GetHost() == "" {
					return "(any other destination)"
				}
				return r.GetHost()
			}),
			render.C("PORTS", func(r *guardv1.EgressRule) string {
				switch {
				case r.GetHost() == "":
					return "any"
				case r.GetPort() == 0:
					return "443, 80"
				}
				return strconv.Itoa(int(r.GetPort()))
			}),
			render.C("EFFECT", func(r *guardv1.EgressRule) string {
				if r.GetHost() == "" && r.GetEffect() == guardv1.Effect_EFFECT_UNSPECIFIED {
					return egressrule.EffectHold + " (the default; not set)"
				}
				if r.GetHost() == "" {
					return enumword.String(r.GetEffect()) + " (the group's default)"
				}
				return enumword.String(r.GetEffect())
			}),
		},
		ID: render.IDOf(func(r *guardv1.EgressRule) string {
			if r.GetPort() == 0 {
				return r.GetHost()
			}
			return egressrule.Destination(r.GetHost(), int(r.GetPort()))
		}),
	}),
}

// A group's way out in the document, under the group: its egress rules
// and default.

// egressSpec is a group's egress policy: its rules and its default ("": not
// set, hold).
type egressSpec struct {
	Default string           `yaml:"default,omitempty"`
	Rules   []egressRuleSpec `yaml:"rules,omitempty"`
}

// egressRuleSpec is one rule: a host pattern, a port (0: 443 and 80), an effect.
type egressRuleSpec struct {
	Host   string `yaml:"host"`
	Port   int32  `yaml:"port,omitempty"`
	Effect string `yaml:"effect"`
}

func (r egressRuleSpec) words() string {
	return egressrule.Rule{Host: r.Host, Port: int(r.Port)}.Describe() + " " + r.Effect
}

// readEgress fills in g's egress policy (grp: the group as read).
func readEgress(ctx context.Context, c *clients, grp *guardv1.Group, g *groupSpec) error {
	resp, err := c.reg.GetEgressPolicy(ctx, &guardv1.GetEgressPolicyRequest{Group: grp.GetId()})
	if err != nil {
		return fmt.Errorf("read the egress rules of %s: %w", g.Name, err)
	}
	pol := resp.GetPolicy()
	if pol.GetDefaultEffect() == guardv1.Effect_EFFECT_UNSPECIFIED && len(pol.GetRules()) == 0 {
		return nil
	}
	g.Egress = &egressSpec{Default: enumword.String(pol.GetDefaultEffect())}
	for _, r := range pol.GetRules() {
		g.Egress.Rules = append(g.Egress.Rules, egressRuleSpec{Host: r.GetHost(), Port: r.GetPort(), Effect: enumword.String(r.GetEffect())})
	}
	return nil
}

// planEgress lists the changes of a group's egress policy (after the group
// exists), and the rules want drops (deletions).
func planEgress(cur, want groupSpec) (changes, dels []change) {
	group := want.Name
	var old, next egressSpec
	if cur.Egress != nil {
		old = *cur.Egress
	}
	if want.Egress != nil {
		next = *want.Egress
	}
	if old.Default != next.Default {
		changes = append(changes, change{'~', fmt.Sprintf("group %s: egress default %s → %s", group, orWord(old.Default, "hold (not set)"), orWord(next.Default, "hold (not set)")),
			setEgressDefault(group, next.Default)})
	}
	for _, r := range next.Rules {
		i := slices.IndexFunc(old.Rules, func(o egressRuleSpec) bool { return o.Host == r.Host && o.Port == r.Port })
		if i >= 0 && old.Rules[i] == r {
			continue
		}
		op, was := byte('+'), ""
		if i >= 0 {
			op, was = '~', old.Rules[i].Effect+" → "
		}
		changes = append(changes, change{op, fmt.Sprintf("egress rule of group %s: %s%s", group, was, r.words()), setEgressRule(group, r)})
	}
	for _, o := range old.Rules {
		if !slices.ContainsFunc(next.Rules, func(r egressRuleSpec) bool { return r.Host == o.Host && r.Port == o.Port }) {
			dels = append(dels, change{'-', fmt.Sprintf("egress rule of group %s: %s", group, o.words()),
				func(ctx context.Context, c *clients, book groupBook) error {
					_, err := c.reg.UnsetEgressRule(ctx, &guardv1.UnsetEgressRuleRequest{Group: idOr(book, group), Host: o.Host, Port: o.Port})
					return err
				}})
		}
	}
	return changes, dels
}

func setEgressDefault(group, effect string) func(ctx context.Context, c *clients, book groupBook) error {
	return func(ctx context.Context, c *clients, book groupBook) error {
		e, err := enumword.Parse[guardv1.Effect](effect)
		if err != nil {
			return fmt.Errorf("group %s: egress default: %w", group, err)
		}
		_, err = c.reg.SetEgressDefault(ctx, &guardv1.SetEgressDefaultRequest{Group: idOr(book, group), Effect: e})
		return err
	}
}

func setEgressRule(group string, r egressRuleSpec) func(ctx context.Context, c *clients, book groupBook) error {
	return func(ctx context.Context, c *clients, book groupBook) error {
		e, err := enumword.Parse[guardv1.Effect](r.Effect)
		if err != nil || e == guardv1.Effect_EFFECT_UNSPECIFIED {
			return fmt.Errorf("group %s: egress rule %s: effect %q: want allow, hold or deny", group, r.Host, r.Effect)
		}
		_, err = c.reg.SetEgressRule(ctx, &guardv1.SetEgressRuleRequest{Group: idOr(book, group), Host: r.Host, Port: r.Port, Effect: e})
		return err
	}
}

func orWord(s, none string) string {
	if s == "" {
		return none
	}
	return s
}
