package resources

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/clawguard/clawguard/proto/egressrule"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/store"
)

// A group's egress rules and default (migration 0400), the facts of
// net.connect (package netconnect). They change under the group's config
// lock but do not bump its version: no container changes, the next
// connection is decided on them.

// egressPolicy is the stored policy of a group.
type egressPolicy struct {
	Rules   []egressrule.Rule
	Default string // "" = hold
}

// readEgressTx reads a group's policy (FOR UPDATE under the config lock).
func readEgressTx(ctx context.Context, q store.Querier, group string, lock bool) (egressPolicy, error) {
	var (
		p   egressPolicy
		raw []byte
	)
	sql := `SELECT egress_rules, egress_default FROM container_configs WHERE agent_group_id = $1`
	if lock {
		sql += ` FOR UPDATE`
	}
	err := q.QueryRow(ctx, sql, group).Scan(&raw, &p.Default)
	if store.IsNoRows(err) {
		return egressPolicy{}, nil
	}
	if err != nil {
		return p, fmt.Errorf("read the egress rules of %s: %w", group, err)
	}
	if err := json.Unmarshal(raw, &p.Rules); err != nil {
		return p, fmt.Errorf("decode the egress rules of %s: %w", group, err)
	}
	return p, nil
}

func (p egressPolicy) proto(group string) (*guardv1.EgressPolicy, error) {
	out := &guardv1.EgressPolicy{Group: group}
	if p.Default != "" {
		e, err := enumFromColumn[guardv1.Effect]("egress_default", p.Default)
		if err != nil {
			return nil, err
		}
		out.DefaultEffect = e
	}
	for _, r := range p.Rules {
		e, err := enumFromColumn[guardv1.Effect]("egress_rules.effect", r.Effect)
		if err != nil {
			return nil, err
		}
		out.Rules = append(out.Rules, &guardv1.EgressRule{Host: r.Host, Port: int32(r.Port), Effect: e})
	}
	return out, nil
}

// GetEgressPolicy reads a group's egress rules and default.
func (s *Service) GetEgressPolicy(ctx context.Context, req *guardv1.GetEgressPolicyRequest) (_ *guardv1.GetEgressPolicyResponse, err error) {
	defer store.Faulted(&err, "egress policy")
	// The group read answers NotFound for a group the caller may not see.
	if _, err := s.GetGroup(ctx, &guardv1.GetGroupRequest{Id: req.GetGroup()}); err != nil {
		return nil, err
	}
	p, err := readEgressTx(ctx, s.pool, req.GetGroup(), false)
	if err != nil {
		return nil, err
	}
	out, err := p.proto(req.GetGroup())
	return &guardv1.GetEgressPolicyResponse{Policy: out}, err
}

// SetEgressRule sets the effect of a host pattern and port (replacing the
// rule of the same host and port).
func (s *Service) SetEgressRule(ctx context.Context, req *guardv1.SetEgressRuleRequest) (_ *guardv1.SetEgressRuleResponse, err error) {
	defer store.Faulted(&err, "egress rule")
	rule, err := checkSetEgressRule(req)
	if err != nil {
		return nil, err
	}
	p, err := s.changeEgress(ctx, req.GetGroup(), func(p *egressPolicy) error {
		p.Rules = slices.DeleteFunc(p.Rules, func(r egressrule.Rule) bool { return r.Host == rule.Host && r.Port == rule.Port })
		if len(p.Rules) >= egressrule.MaxRules {
			return invalid("host", "group %q has %d egress rules, the most a group may have (remove some, or set its default)", req.GetGroup(), len(p.Rules))
		}
		p.Rules = append(p.Rules, rule)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &guardv1.SetEgressRuleResponse{Policy: p}, nil
}

// UnsetEgressRule removes the rule of a host pattern and port.
func (s *Service) UnsetEgressRule(ctx context.Context, req *guardv1.UnsetEgressRuleRequest) (_ *guardv1.UnsetEgressRuleResponse, err error) {
	defer store.Faulted(&err, "egress rule")
	host, port, err := checkEgressTarget(req.GetGroup(), req.GetHost(), req.GetPort())
	if err != nil {
		return nil, err
	}
	p, err := s.changeEgress(ctx, req.GetGroup(), func(p *egressPolicy) error {
		n := len(p.Rules)
		p.Rules = slices.DeleteFunc(p.Rules, func(r egressrule.Rule) bool { return r.Host == host && r.Port == port })
		if len(p.Rules) == n {
			return notFound("group %q has no egress rule for %s (ncl egress list --group %s)", req.GetGroup(),
				egressrule.Rule{Host: host, Port: port}.Describe(), req.GetGroup())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &guardv1.UnsetEgressRuleResponse{Policy: p}, nil
}

// SetEgressDefault sets (or, unspecified, removes) what a destination no
// rule names gets.
func (s *Service) SetEgressDefault(ctx context.Context, req *guardv1.SetEgressDefaultRequest) (_ *guardv1.SetEgressDefaultResponse, err error) {
	defer store.Faulted(&err, "egress default")
	def, err := checkSetEgressDefault(req)
	if err != nil {
		return nil, err
	}
	p, err := s.changeEgress(ctx, req.GetGroup(), func(p *egressPolicy) error {
		p.Default = def
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &guardv1.SetEgressDefaultResponse{Policy: p}, nil
}

// changeEgress applies change to a group's policy under its config lock and
// writes it back, rules sorted by host and port.
func (s *Service) changeEgress(ctx context.Context, group string, change func(*egressPolicy) error) (*guardv1.EgressPolicy, error) {
	var out *guardv1.EgressPolicy
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := LockConfigTx(ctx, tx, group); err != nil {
			return err
		}
		p, err := readEgressTx(ctx, tx, group, true)
		if err != nil {
			return err
		}
		if err := change(&p); err != nil {
			return err
		}
		slices.SortFunc(p.Rules, func(a, b egressrule.Rule) int {
			if c := strings.Compare(a.Host, b.Host); c != 0 {
				return c
			}
			return a.Port - b.Port
		})
		if p.Rules == nil {
			p.Rules = []egressrule.Rule{}
		}
		raw, err := json.Marshal(p.Rules)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE container_configs SET egress_rules = $2, egress_default = $3, updated_at = now()
			WHERE agent_group_id = $1`, group, raw, p.Default); err != nil {
			return fmt.Errorf("write the egress rules of %s: %w", group, err)
		}
		out, err = p.proto(group)
		return err
	})
	return out, err
}

// checkEgressTarget reads a rule's group, host pattern and port.
func checkEgressTarget(group, host string, port int32) (string, int, error) {
	if err := required("group", group); err != nil {
		return "", 0, err
	}
	h, err := egressrule.NormalizePattern(host)
	if err != nil {
		return "", 0, invalid("host", "%v", err)
	}
	if port != 0 {
		if err := egressrule.CheckPort(int(port)); err != nil {
			return "", 0, invalid("port", "%v", err)
		}
	}
	return h, int(port), nil
}

func checkSetEgressRule(r *guardv1.SetEgressRuleRequest) (egressrule.Rule, error) {
	host, port, err := checkEgressTarget(r.GetGroup(), r.GetHost(), r.GetPort())
	if err != nil {
		return egressrule.Rule{}, err
	}
	if r.GetEffect() == guardv1.Effect_EFFECT_UNSPECIFIED {
		return egressrule.Rule{}, invalid("effect", "required: allow, hold or deny (ncl egress unset removes a rule)")
	}
	e, err := enumColumn("effect", r.GetEffect())
	if err != nil {
		return egressrule.Rule{}, err
	}
	return egressrule.Rule{Host: host, Port: port, Effect: e}, nil
}

func checkSetEgressDefault(r *guardv1.SetEgressDefaultRequest) (string, error) {
	if err := required("group", r.GetGroup()); err != nil {
		return "", err
	}
	return enumColumn("effect", r.GetEffect())
}
