// Package egressrule is the one rule for an agent's outbound connection,
// shared by the runner that proxies it, the server that decides it and ncl
// that sets the rules: what a destination is (a host and a port), what a
// rule's host pattern may be, and which rule answers.
//
// A rule names a host exactly ("api.github.com", "140.82.112.3") or every
// name below a domain ("*.github.com": api.github.com and a.b.github.com,
// not github.com itself), and a port (0: 443 and 80). Of the rules that
// match a destination the most restrictive answers (deny, then hold, then
// allow), so a deny can never be loosened by another rule; a destination
// no rule matches gets the group's default, hold when none is set.
package egressrule

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// The names of an outbound connection in the guard's catalog.
const (
	CatalogAction = "net.connect" // what the guard decides
	ApprovalKind  = "net_connect" // the hold kind of its grants
)

// Resource and payload keys: {host, port}, the port in decimal.
const (
	KeyHost = "host"
	KeyPort = "port"
)

// Effects a rule or a group's default sets.
const (
	EffectAllow = "allow"
	EffectHold  = "hold"
	EffectDeny  = "deny"
)

// MaxRules bounds a group's rules: they are read whole on every decision.
const MaxRules = 256

// Rule is one of a group's egress rules.
type Rule struct {
	Host   string `json:"host"`           // a normalised host or "*." pattern
	Port   int    `json:"port,omitempty"` // 0: 443 and 80
	Effect string `json:"effect"`
}

// DefaultPorts are the ports a rule without a port covers.
var DefaultPorts = [2]int{443, 80}

// ErrHost is wrapped by every refusal of a host or pattern.
var ErrHost = errors.New("not a host name or IP address")

// NormalizeHost is a destination's host as the rules see it: lower case,
// without a trailing dot or IPv6 brackets; an IP address in its canonical
// form (an IPv4-mapped IPv6 address as IPv4). Anything that is neither a
// DNS name of letters, digits and hyphens nor an IP address is refused.
func NormalizeHost(h string) (string, error) {
	raw := h
	h = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	if ip, err := netip.ParseAddr(h); err == nil {
		if ip.Zone() != "" {
			return "", fmt.Errorf("%w: %q has an IPv6 zone", ErrHost, raw)
		}
		return ip.Unmap().String(), nil
	}
	if err := checkName(h); err != nil {
		return "", fmt.Errorf("%w: %q: %v", ErrHost, raw, err)
	}
	if looksNumeric(h) {
		// "127.1" or "0x7f.1": dialers read these as addresses.
		return "", fmt.Errorf("%w: %q reads as a shortened IP address; write it in full", ErrHost, raw)
	}
	return h, nil
}

// IsIP reports whether a normalised host is an IP address.
func IsIP(host string) bool {
	_, err := netip.ParseAddr(host)
	return err == nil
}

// checkName checks a DNS name: 1..253 bytes, labels of 1..63 letters,
// digits and hyphens, not starting or ending with a hyphen.
func checkName(h string) error {
	if h == "" || len(h) > 253 {
		return errors.New("a name has 1 to 253 characters")
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return errors.New("each dot-separated label has 1 to 63 characters")
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return errors.New("a label does not start or end with a hyphen")
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("%q is not allowed in a host name (international names are written in punycode, xn--…)", string(c))
			}
		}
	}
	return nil
}

// looksNumeric reports a name whose last label is all digits or hex
// (0x…): no top-level domain is, and resolvers and dialers may take such a
// name for an IPv4 address in a short or octal form.
func looksNumeric(h string) bool {
	last := h[strings.LastIndexByte(h, '.')+1:]
	if strings.HasPrefix(last, "0x") {
		return true
	}
	for i := 0; i < len(last); i++ {
		if last[i] < '0' || last[i] > '9' {
			return false
		}
	}
	return true
}

// NormalizePattern is a rule's host as stored: a normalised host, or "*."
// and a name of at least two labels. A bare "*", a wildcard elsewhere or
// over an IP address is refused: the group's default is how every
// destination is set at once.
func NormalizePattern(p string) (string, error) {
	t := strings.TrimSpace(p)
	if base, ok := strings.CutPrefix(t, "*."); ok {
		b, err := NormalizeHost(base)
		switch {
		case err != nil:
			return "", err
		case IsIP(b):
			return "", fmt.Errorf("%w: %q: a wildcard covers names, not addresses", ErrHost, p)
		case !strings.Contains(b, "."):
			return "", fmt.Errorf("%w: %q: a wildcard needs at least two labels after \"*.\" (set the group's default to cover every destination)", ErrHost, p)
		}
		return "*." + b, nil
	}
	if strings.Contains(t, "*") {
		return "", fmt.Errorf("%w: %q: a wildcard is only allowed as a leading \"*.\"", ErrHost, p)
	}
	return NormalizeHost(t)
}

// CheckPort refuses a port outside 1..65535 (0 too: a destination always
// has a port; a rule's 0 is written as "no port").
func CheckPort(port int) error {
	if port < 1 || port > 65535 {
		return fmt.Errorf("port %d is not between 1 and 65535", port)
	}
	return nil
}

// ParsePort reads a decimal port as the resource carries it.
func ParsePort(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || strconv.Itoa(n) != s {
		return 0, fmt.Errorf("port %q is not a decimal number", s)
	}
	return n, CheckPort(n)
}

// Matches reports whether a rule covers host:port (host normalised).
func (r Rule) Matches(host string, port int) bool {
	if r.Port == 0 {
		if port != DefaultPorts[0] && port != DefaultPorts[1] {
			return false
		}
	} else if r.Port != port {
		return false
	}
	if base, ok := strings.CutPrefix(r.Host, "*."); ok {
		return !IsIP(host) && strings.HasSuffix(host, "."+base)
	}
	return r.Host == host
}

// Answer is which effect a destination gets, and from what.
type Answer struct {
	Effect string
	// Rule is the rule that answered; nil when the group's default did.
	Rule *Rule
	// Default reports a default the operator set (false: the built-in hold).
	Default bool
}

// restrictiveness orders effects: a larger one wins.
func restrictiveness(effect string) int {
	switch effect {
	case EffectAllow:
		return 1
	case EffectHold:
		return 2
	}
	return 3 // deny, and anything unknown (fail closed)
}

// Decide is the one rule: of the rules that match host:port the most
// restrictive answers; none → the default ("" → hold). An effect that is
// not one of the three is a deny.
func Decide(rules []Rule, def, host string, port int) Answer {
	var best *Rule
	for i := range rules {
		r := &rules[i]
		if r.Matches(host, port) && (best == nil || restrictiveness(r.Effect) > restrictiveness(best.Effect)) {
			best = r
		}
	}
	if best != nil {
		return Answer{Effect: known(best.Effect), Rule: best}
	}
	if def == "" {
		return Answer{Effect: EffectHold}
	}
	return Answer{Effect: known(def), Default: true}
}

func known(effect string) string {
	switch effect {
	case EffectAllow, EffectHold:
		return effect
	}
	return EffectDeny
}

// CheckEffect refuses an effect that is not allow, hold or deny.
func CheckEffect(effect string) error {
	switch effect {
	case EffectAllow, EffectHold, EffectDeny:
		return nil
	}
	return fmt.Errorf("effect %q is not allow, hold or deny", effect)
}

// Destination is host:port as a person reads it ([v6]:port).
func Destination(host string, port int) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + strconv.Itoa(port)
	}
	return host + ":" + strconv.Itoa(port)
}

// Describe is a rule as a person reads it: "*.github.com (443, 80)".
func (r Rule) Describe() string {
	if r.Port == 0 {
		return r.Host + " (443, 80)"
	}
	return Destination(r.Host, r.Port)
}

// Resource is the decided resource (and payload) of a connection.
func Resource(host string, port int) map[string]string {
	return map[string]string{KeyHost: host, KeyPort: strconv.Itoa(port)}
}
