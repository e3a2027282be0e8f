package app

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/config"
	"github.com/clawguard/clawguard/runner/internal/egress"
	"github.com/clawguard/clawguard/runner/internal/modelgw"
	"github.com/clawguard/clawguard/runner/internal/runtime/docker"
)

// wireEgress makes the runner's egress proxy: every session's way out,
// each connection a net.connect decision on the runner's DecideStream; its
// origin-form requests are the model gateway's (wireModels).
func (r *Runner) wireEgress() error {
	allowed, err := egress.ParseAllowed(r.Config.Egress.AllowCIDRs)
	if err != nil {
		return err
	}
	r.egressPolicy = &egress.AddressPolicy{Allowed: allowed}
	addOwnAddresses(r.egressPolicy, r.Config)
	guard := &egress.GuardClient{Decide: r.decideWithin, Approvals: guardv1.NewApprovalsClient(r.Conn)}
	if err := r.wireModels(); err != nil {
		return err
	}
	r.Egress, err = egress.New(egress.Config{Decider: guard, Awaiter: guard, Policy: r.egressPolicy, Resolver: resolver(r.Config.Egress.DNS),
		Limits: r.Config.Egress.Limits, Metrics: egress.NewMetrics(r.registry.Registry), Log: r.Log, Origin: r.Models.Handler})
	return err
}

// decideWithin asks the guard on the runner's DecideStream, failing closed
// after --decide-wait.
func (r *Runner) decideWithin(ctx context.Context, req *guardv1.DecideRequest) (*guardv1.DecideResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, r.Config.DecideWait)
	defer cancel()
	return r.Decide.Decide(ctx, req)
}

// wireModels makes the model gateway: each session's model calls, served
// on its egress socket, each a model.call decision, forwarded with the
// provider's key the server gives this runner alone.
func (r *Runner) wireModels() error {
	transport, err := modelgw.ProviderTransport(r.Config.Models.CAFile)
	if err != nil {
		return err
	}
	r.Models, err = modelgw.New(modelgw.Config{
		Guard:  &modelgw.GuardClient{DecideFunc: r.decideWithin, Approvals: guardv1.NewApprovalsClient(r.Conn)},
		Models: r.regCli, Transport: transport, Limits: r.Config.Models.Limits,
		Metrics: modelgw.NewMetrics(r.registry.Registry), Log: r.Log,
	})
	return err
}

// resolver resolves agents' destinations: with the server --egress-dns
// names ("" = the host's resolver).
func resolver(server string) egress.Resolver {
	if server == "" {
		return net.DefaultResolver
	}
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, server)
	}}
}

// addOwnAddresses marks what no agent may reach through the runner: the
// host's own addresses, the server's (its address and port, whatever range
// is open), and the runner's metrics listener.
func addOwnAddresses(p *egress.AddressPolicy, cfg config.Config) {
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if pfx, err := netip.ParsePrefix(a.String()); err == nil {
				p.AddOwnAddresses(pfx.Addr())
			}
		}
	}
	for _, hp := range []string{cfg.Server, cfg.MetricsListen} {
		host, port, err := net.SplitHostPort(hp)
		if err != nil {
			continue
		}
		var ips []netip.Addr
		if ip, err := netip.ParseAddr(host); err == nil {
			ips = []netip.Addr{ip}
		} else if host != "" {
			ips, _ = net.DefaultResolver.LookupNetIP(context.Background(), "ip", host)
		}
		if host == "" || (len(ips) == 1 && ips[0].IsUnspecified()) {
			ips = append(ips, netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1"))
			if addrs, err := net.InterfaceAddrs(); err == nil {
				for _, a := range addrs {
					if pfx, err := netip.ParsePrefix(a.String()); err == nil {
						ips = append(ips, pfx.Addr())
					}
				}
			}
		}
		var n uint64
		fmt.Sscan(port, &n)
		for _, ip := range ips {
			p.AddOwnEndpoints(netip.AddrPortFrom(ip, uint16(n)))
			if hp == cfg.Server {
				p.AddOwnAddresses(ip)
			}
		}
	}
}

// agentTools are the files every agent image gets: clawguard-init and
// clawguard-mcp from --agent-tools-dir (the runner's own directory by
// default), and the CA roots of --agent-ca-file (the system bundle by
// default, when there is one).
func agentTools(cfg config.Config) (docker.AgentTools, error) {
	dir := cfg.Tools.Dir
	if dir == "" {
		exe, err := os.Executable()
		if err != nil {
			return docker.AgentTools{}, fmt.Errorf("--agent-tools-dir: the runner's own directory: %w", err)
		}
		dir = filepath.Dir(exe)
	}
	t := docker.AgentTools{Init: filepath.Join(dir, "clawguard-init"), MCP: filepath.Join(dir, "clawguard-mcp")}
	for _, f := range []string{t.Init, t.MCP} {
		if _, err := os.Stat(f); err != nil {
			return t, fmt.Errorf("agent tools: %s is not there (make build puts clawguard-init and clawguard-mcp beside the runner; or set --agent-tools-dir)", f)
		}
	}
	switch cfg.Tools.CAFile {
	case "none":
	case "":
		if _, err := os.Stat(systemCABundle); err == nil {
			t.CABundle = systemCABundle
		}
	default:
		t.CABundle = cfg.Tools.CAFile
	}
	return t, nil
}

// systemCABundle is Debian's (and most distributions') CA roots bundle.
const systemCABundle = "/etc/ssl/certs/ca-certificates.crt"
