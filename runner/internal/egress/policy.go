package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
)

// Addresses no agent reaches, whatever its group's rules say: loopback,
// link-local (cloud metadata at 169.254.169.254 among them), the private
// and shared ranges, and every special-purpose range an address of the
// public internet is not in (RFC 6890). NAT64, 6to4 and Teredo are refused
// because they embed an IPv4 address of any kind. An operator may open a
// range on the runner (AddressPolicy.Allowed, --egress-allow-cidr).
var blockedPrefixes = mustPrefixes(
	"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
	"192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24",
	"203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
	"::/128", "::1/128", "::ffff:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64", "2001::/32", "2001:db8::/32",
	"2002::/16", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8",
)

func mustPrefixes(cidrs ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(cidrs))
	for i, c := range cidrs {
		out[i] = netip.MustParsePrefix(c)
	}
	return out
}

// ErrBlocked marks a destination address no agent may reach.
var ErrBlocked = errors.New("address not reachable from an agent")

// AddressPolicy says which addresses an agent's connection may be dialed
// to. It is checked on every address a name resolves to, before the dial,
// and again on the address the dialer connects to.
type AddressPolicy struct {
	// Allowed are ranges the operator opened on this runner
	// (--egress-allow-cidr): an address in one is reachable even when it
	// is private or loopback.
	Allowed []netip.Prefix

	mu sync.RWMutex
	// own are the runner's and the server's addresses and the runner's own
	// listeners: never reachable, an allowed range included (an agent must
	// not reach the runner's metrics or the control plane through it).
	ownAddrs     []netip.Addr
	ownEndpoints []netip.AddrPort
}

// AddOwnAddresses marks addresses of the runner's host and of the server:
// never reachable by an agent, on any port, unless a range the operator
// allowed names them.
func (p *AddressPolicy) AddOwnAddresses(addrs ...netip.Addr) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range addrs {
		p.ownAddrs = append(p.ownAddrs, a.Unmap())
	}
}

// AddOwnEndpoints marks the runner's own listeners and the server's address
// (host and port): never reachable, an allowed range included.
func (p *AddressPolicy) AddOwnEndpoints(eps ...netip.AddrPort) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range eps {
		p.ownEndpoints = append(p.ownEndpoints, netip.AddrPortFrom(e.Addr().Unmap(), e.Port()))
	}
}

// Check refuses an address and port an agent may not reach, saying why.
func (p *AddressPolicy) Check(ap netip.AddrPort) error {
	a := ap.Addr().Unmap()
	if !a.IsValid() || a.Zone() != "" {
		return fmt.Errorf("%w: %s is not a plain IP address", ErrBlocked, ap.Addr())
	}
	p.mu.RLock()
	ownEndpoint := slices.Contains(p.ownEndpoints, netip.AddrPortFrom(a, ap.Port()))
	ownAddr := slices.Contains(p.ownAddrs, a)
	p.mu.RUnlock()
	if ownEndpoint {
		return fmt.Errorf("%w: %s is the runner's or the server's own endpoint", ErrBlocked, netip.AddrPortFrom(a, ap.Port()))
	}
	for _, allowed := range p.Allowed {
		if allowed.Contains(a) {
			return nil
		}
	}
	if ownAddr {
		return fmt.Errorf("%w: %s is an address of the runner's host or of the server", ErrBlocked, a)
	}
	for _, b := range blockedPrefixes {
		if b.Contains(a) {
			return fmt.Errorf("%w: %s is in %s (%s)", ErrBlocked, a, b, rangeName(b))
		}
	}
	return nil
}

// rangeName says what a blocked range is, for the agent and the log.
func rangeName(b netip.Prefix) string {
	a := b.Addr()
	switch {
	case a.IsLoopback():
		return "loopback"
	case b.String() == "169.254.0.0/16":
		return "link-local, cloud metadata"
	case a.IsLinkLocalUnicast():
		return "link-local"
	case a.IsPrivate(), b.String() == "100.64.0.0/10":
		return "private"
	case a.IsMulticast():
		return "multicast"
	}
	return "special-purpose"
}

// ParseAllowed reads --egress-allow-cidr values (a CIDR or one address).
func ParseAllowed(values []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range values {
		if pfx, err := netip.ParsePrefix(v); err == nil {
			out = append(out, pfx.Masked())
			continue
		}
		a, err := netip.ParseAddr(v)
		if err != nil {
			return nil, fmt.Errorf("--egress-allow-cidr %q: not a CIDR or an IP address", v)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}
