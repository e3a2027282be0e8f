package e2e

import (
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// testDNS is a DNS server the test controls (the runner's --egress-dns):
// each name's answers, given in turn (the last one repeats), so a test can
// make a name answer differently from one lookup to the next.
type testDNS struct {
	addr string
	mu   sync.Mutex
	// answers: lower-case name without the final dot → the addresses of
	// each lookup in turn.
	answers map[string][][]netip.Addr
	asked   map[string]int
}

func newTestDNS(t *testing.T, answers map[string][][]netip.Addr) *testDNS {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	d := &testDNS{addr: pc.LocalAddr().String(), answers: answers, asked: map[string]int{}}
	go d.serve(pc)
	return d
}

func (d *testDNS) serve(pc net.PacketConn) {
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		if out, err := d.answer(buf[:n]); err == nil {
			pc.WriteTo(out, from)
		}
	}
}

// answer is the reply to one query: A or AAAA records of the name's next
// answer (NXDOMAIN for a name it does not know).
func (d *testDNS) answer(query []byte) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	name := strings.TrimSuffix(strings.ToLower(q.Name.String()), ".")
	addrs, known := d.next(name, q.Type)
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired}
	if !known {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	for _, a := range addrs {
		rrh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 0}
		switch {
		case a.Is4() && q.Type == dnsmessage.TypeA:
			err = b.AResource(rrh, dnsmessage.AResource{A: a.As4()})
		case a.Is6() && !a.Is4In6() && q.Type == dnsmessage.TypeAAAA:
			err = b.AAAAResource(rrh, dnsmessage.AAAAResource{AAAA: a.As16()})
		}
		if err != nil {
			return nil, err
		}
	}
	return b.Finish()
}

// next is the name's answer for this lookup (an A and an AAAA query of the
// same lookup see the same answer: the count moves on the A query).
func (d *testDNS) next(name string, typ dnsmessage.Type) ([]netip.Addr, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	list, ok := d.answers[name]
	if !ok || len(list) == 0 {
		return nil, false
	}
	i := d.asked[name]
	if typ == dnsmessage.TypeA {
		d.asked[name]++
	} else if i > 0 {
		i--
	}
	if i >= len(list) {
		i = len(list) - 1
	}
	return list[i], true
}
