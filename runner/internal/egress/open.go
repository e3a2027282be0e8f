package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"

	"github.com/clawguard/clawguard/proto/egressrule"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Resolver resolves a host name (net.Resolver; tests give their own).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// opened is an upstream connection the guard allowed.
type opened struct {
	conn       net.Conn
	addr       netip.AddrPort
	decisionID string
}

// open is the one path to a destination: the addresses it resolves to are
// checked first (a private, loopback or metadata address is never
// reachable, and never offered for approval); then the guard decides on the
// name, a hold waiting a short while for its approval; then the checked
// address is dialed, and checked again as the socket connects. The name is
// resolved once: nothing the DNS answers later is dialed.
func (sp *sessionProxy) open(ctx context.Context, d Dest) (*opened, *refused) {
	dest := egressrule.Destination(d.Host, d.Port)
	addrs, rf := sp.p.resolve(ctx, d)
	if rf != nil {
		return nil, rf
	}
	v, rf := sp.decide(ctx, d)
	if rf != nil {
		return nil, rf
	}
	conn, addr, err := sp.p.dial(ctx, addrs, d.Port)
	if err != nil {
		var blocked *refused
		if errors.As(err, &blocked) {
			return nil, blocked
		}
		return nil, &refused{status: http.StatusBadGateway, outcome: "failed",
			text: fmt.Sprintf("connection to %s allowed, but it could not be opened: %v", dest, err)}
	}
	return &opened{conn: conn, addr: addr, decisionID: v.DecisionID}, nil
}

// resolve is a destination's addresses, each one checked: one the agent may
// not reach refuses the whole destination (a name answering both a public
// and a private address is someone's trick).
func (p *Proxy) resolve(ctx context.Context, d Dest) ([]netip.Addr, *refused) {
	dest := egressrule.Destination(d.Host, d.Port)
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(d.Host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		rctx, cancel := context.WithTimeout(ctx, p.cfg.Limits.DialTimeout)
		defer cancel()
		addrs, err = p.cfg.Resolver.LookupNetIP(rctx, "ip", d.Host)
		if err != nil || len(addrs) == 0 {
			return nil, &refused{status: http.StatusBadGateway, outcome: "failed", text: fmt.Sprintf("%s does not resolve: %v", d.Host, err)}
		}
	}
	for _, a := range addrs {
		if err := p.cfg.Policy.Check(netip.AddrPortFrom(a, uint16(d.Port))); err != nil {
			text := fmt.Sprintf("connection to %s refused: %v; no agent reaches it, and it is never offered for approval", dest, err)
			if !egressrule.IsIP(d.Host) {
				text = fmt.Sprintf("connection to %s refused: %s resolves to %v; no agent reaches it, and it is never offered for approval", dest, d.Host, err)
			}
			return nil, &refused{status: http.StatusForbidden, outcome: "blocked", text: text}
		}
	}
	return addrs, nil
}

// decide asks the guard; a hold waits up to HoldWait for its approval and
// is then asked again (its approval is used by that second decision).
func (sp *sessionProxy) decide(ctx context.Context, d Dest) (Verdict, *refused) {
	v, rf := sp.ask(ctx, d)
	if rf != nil || v.Effect != guardv1.Effect_EFFECT_HOLD {
		return v, rf
	}
	dest := egressrule.Destination(d.Host, d.Port)
	if v.HoldID == "" {
		return v, &refused{status: http.StatusForbidden, outcome: "denied",
			text: fmt.Sprintf("connection to %s needs approval, but no hold could be made: %s", dest, v.HoldError)}
	}
	res, err := sp.p.cfg.Awaiter.Await(ctx, v.HoldID, sp.p.cfg.Limits.HoldWait)
	switch {
	case err != nil || !res.Resolved:
		return v, sp.held(d, v)
	case res.Outcome == guardv1.Outcome_OUTCOME_APPROVE:
		again, rf := sp.ask(ctx, d)
		if rf == nil && again.Effect == guardv1.Effect_EFFECT_HOLD {
			return again, sp.held(d, again)
		}
		return again, rf
	case res.Outcome == guardv1.Outcome_OUTCOME_REJECT:
		why := ""
		if res.Reason != "" {
			why = fmt.Sprintf(": %q", res.Reason)
		}
		return v, &refused{status: http.StatusForbidden, outcome: "denied", holdID: v.HoldID,
			text: fmt.Sprintf("connection to %s was rejected by %s (hold %s)%s", dest, orSomeone(res.Resolver), v.HoldID, why)}
	}
	return v, &refused{status: http.StatusForbidden, outcome: "held", holdID: v.HoldID,
		text: fmt.Sprintf("connection to %s: hold %s ended without an approval (%s)", dest, v.HoldID, res.Outcome)}
}

// ask is one decision; anything but ALLOW or HOLD is the refusal.
func (sp *sessionProxy) ask(ctx context.Context, d Dest) (Verdict, *refused) {
	dest := egressrule.Destination(d.Host, d.Port)
	v, err := sp.p.cfg.Decider.Connect(ctx, sp.s, d)
	if err != nil {
		return v, &refused{status: http.StatusServiceUnavailable, outcome: "undecided", retry: 2e9,
			text: fmt.Sprintf("connection to %s not opened: the guard could not be asked (%v); nothing was connected, retry", dest, err)}
	}
	switch v.Effect {
	case guardv1.Effect_EFFECT_ALLOW, guardv1.Effect_EFFECT_HOLD:
		return v, nil
	}
	return v, &refused{status: http.StatusForbidden, outcome: "denied", text: fmt.Sprintf("connection to %s denied: %s", dest, v.Reason)}
}

// held is the answer to a connection still held when the wait ended.
func (sp *sessionProxy) held(d Dest, v Verdict) *refused {
	who := ""
	if v.Approvers != "" {
		who = "; " + v.Approvers + " may approve it"
	}
	return &refused{status: http.StatusForbidden, outcome: "held", holdID: v.HoldID, retry: sp.p.cfg.Limits.HoldWait,
		text: fmt.Sprintf("connection to %s is held for approval (hold %s%s): retry once it is approved; the next connection to it uses the approval",
			egressrule.Destination(d.Host, d.Port), v.HoldID, who)}
}

func orSomeone(user string) string {
	if user == "" {
		return "an approver"
	}
	return user
}

// dial connects to the first checked address that answers. The socket's
// address is checked once more as it connects (Control): nothing but a
// checked address is ever reached.
func (p *Proxy) dial(ctx context.Context, addrs []netip.Addr, port int) (net.Conn, netip.AddrPort, error) {
	dialer := net.Dialer{Timeout: p.cfg.Limits.DialTimeout, Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("dial %s: %w", address, err)
		}
		if err := p.cfg.Policy.Check(ap); err != nil {
			return &refused{status: http.StatusForbidden, outcome: "blocked", text: err.Error()}
		}
		return nil
	}}
	var errs []error
	for _, a := range addrs {
		ap := netip.AddrPortFrom(a, uint16(port))
		c, err := dialer.DialContext(ctx, "tcp", ap.String())
		if err == nil {
			return c, ap, nil
		}
		var blocked *refused
		if errors.As(err, &blocked) {
			return nil, ap, blocked
		}
		errs = append(errs, err)
	}
	return nil, netip.AddrPort{}, errors.Join(errs...)
}
