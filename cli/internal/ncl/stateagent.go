package ncl

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/clawguard/clawguard/proto/egressrule"
	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// A group's agent and its way out in the document: the agent's command,
// its non-secret environment and its instructions (ncl groups config
// update, ncl groups update), and its egress rules and default (ncl egress).

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

// readGroupAgent fills in g's agent settings from the group and its egress
// policy (id: the group's id).
func readGroupAgent(ctx context.Context, c *clients, grp *guardv1.Group, g *groupSpec) error {
	g.AgentCommand = slices.Clone(grp.GetConfig().GetAgentCommand())
	if env := grp.GetConfig().GetAgentEnv(); len(env) > 0 {
		g.AgentEnv = maps.Clone(env)
	}
	g.Instructions = grp.GetInstructions()
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

// planGroupAgent lists the changes of a group's agent settings and egress
// policy (after the group exists), and the rules want drops (deletions).
func planGroupAgent(cur, want groupSpec) (changes, dels []change) {
	group := want.Name
	if !slices.Equal(cur.AgentCommand, want.AgentCommand) || !maps.Equal(cur.AgentEnv, want.AgentEnv) {
		changes = append(changes, change{'~', fmt.Sprintf("group %s: agent command %q, environment %s", group,
			strings.Join(want.AgentCommand, " "), strings.Join(sortedKeys(want.AgentEnv), ", ")), setAgent(cur, want)})
	}
	if cur.Instructions != want.Instructions {
		text := want.Instructions
		changes = append(changes, change{'~', fmt.Sprintf("group %s: instructions (%d bytes)", group, len(text)),
			func(ctx context.Context, c *clients, book groupBook) error {
				_, err := c.reg.UpdateGroup(ctx, &guardv1.UpdateGroupRequest{Id: idOr(book, group), Instructions: &text})
				return err
			}})
	}
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

// setAgent sets the agent command and environment as want has them (a
// variable cur has and want drops is removed).
func setAgent(cur, want groupSpec) func(ctx context.Context, c *clients, book groupBook) error {
	return func(ctx context.Context, c *clients, book groupBook) error {
		env := map[string]string{}
		for k := range cur.AgentEnv {
			env[k] = ""
		}
		maps.Copy(env, want.AgentEnv)
		args := want.AgentCommand
		if args == nil {
			args = []string{}
		}
		_, err := c.reg.UpdateGroupConfig(ctx, &guardv1.UpdateGroupConfigRequest{Group: idOr(book, want.Name),
			AgentCommand: &guardv1.AgentCommand{Args: args}, AgentEnv: env})
		return err
	}
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

func sortedKeys(m map[string]string) []string {
	keys := slices.Collect(maps.Keys(m))
	slices.Sort(keys)
	return keys
}
