package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// netHost is a "host": a network namespace joined to this (root) namespace
// by a veth pair on its own /30. Programs started with Wrap() run inside it;
// Gateway is the root side's address, reachable from the host.
type netHost struct {
	NS      string // namespace name
	Addr    string // the host's address, inside the namespace
	Gateway string // the root namespace's end of the link
}

// Wrap is the command prefix that runs a program on this host.
func (h netHost) Wrap() []string { return []string{"ip", "netns", "exec", h.NS} }

// requireNetns fails (CI) or skips (elsewhere) when network namespaces
// cannot be made: not root, or no `ip`.
func requireNetns(t *testing.T) {
	t.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "needs root to create network namespaces"
	} else if _, err := exec.LookPath("ip"); err != nil {
		why = "needs iproute2's ip (apt-get install iproute2)"
	}
	if why == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
}

// newHosts makes n hosts on 10.<a>.<b>.<4i>/30 links, with a and b chosen
// at random among subnets no route of this machine uses yet. Everything is
// removed when the test ends (deleting a namespace deletes its veth pair).
func newHosts(t *testing.T, n int) []netHost {
	t.Helper()
	routes, err := exec.Command("ip", "-4", "route", "show", "table", "all").Output()
	if err != nil {
		t.Fatalf("ip route: %v", err)
	}
	var prefix string
	for range 50 {
		a, _ := rand.Int(rand.Reader, big.NewInt(200))
		b, _ := rand.Int(rand.Reader, big.NewInt(250))
		p := fmt.Sprintf("10.%d.%d.", a.Int64()+50, b.Int64()+1)
		if !strings.Contains(string(routes), p) {
			prefix = p
			break
		}
	}
	if prefix == "" {
		t.Fatal("no free 10.x.y.0/24 for the test hosts")
	}
	tag := make([]byte, 3)
	_, _ = rand.Read(tag)
	id := hex.EncodeToString(tag)

	hosts := make([]netHost, n)
	for i := range hosts {
		h := netHost{
			NS:      fmt.Sprintf("cg-e2e-%s-%c", id, 'a'+i),
			Gateway: fmt.Sprintf("%s%d", prefix, 4*i+1),
			Addr:    fmt.Sprintf("%s%d", prefix, 4*i+2),
		}
		outer, inner := fmt.Sprintf("cg%s%co", id, 'a'+i), fmt.Sprintf("cg%s%ci", id, 'a'+i) // ≤ 15 chars
		ipCmd(t, "netns", "add", h.NS)
		t.Cleanup(func() {
			_ = exec.Command("ip", "netns", "del", h.NS).Run()
			_ = os.RemoveAll(filepath.Join("/etc/netns", h.NS))
		})
		ipCmd(t, "link", "add", outer, "type", "veth", "peer", "name", inner, "netns", h.NS)
		ipCmd(t, "addr", "add", h.Gateway+"/30", "dev", outer)
		ipCmd(t, "link", "set", outer, "up")
		ipCmd(t, "-n", h.NS, "link", "set", "lo", "up")
		ipCmd(t, "-n", h.NS, "addr", "add", h.Addr+"/30", "dev", inner)
		ipCmd(t, "-n", h.NS, "link", "set", inner, "up")
		// The other hosts' links are reached through the root namespace,
		// which owns every gateway address (Linux answers for any local
		// address on any interface), so no forwarding is needed.
		ipCmd(t, "-n", h.NS, "route", "add", prefix+"0/24", "via", h.Gateway)
		hosts[i] = h
	}
	return hosts
}

// SetHosts gives the host its own /etc/hosts (ip netns exec bind-mounts
// /etc/netns/<ns>/hosts over /etc/hosts) mapping name to addrs in order, and
// a resolv.conf pointing at the host's own loopback, so a DNS query fails at
// once instead of timing out against a resolver the namespace cannot reach.
func (h netHost) SetHosts(t *testing.T, name string, addrs ...string) {
	t.Helper()
	dir := filepath.Join("/etc/netns", h.NS)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	hosts := "127.0.0.1 localhost\n"
	for _, a := range addrs {
		hosts += a + " " + name + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "hosts"), []byte(hosts), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "resolv.conf"), []byte("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// PeersOn lists the remote addresses of this host's established TCP
// connections to the given port (who the host is talking to).
func (h netHost) PeersOn(port string) ([]string, error) {
	out, err := exec.Command("ip", "netns", "exec", h.NS, "ss", "-Htn", "state", "established").Output()
	if err != nil {
		return nil, fmt.Errorf("ss in %s: %w", h.NS, err)
	}
	var peers []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		host, p, err := net.SplitHostPort(f[len(f)-1])
		if err == nil && p == port {
			peers = append(peers, host)
		}
	}
	return peers, nil
}

func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
