// Package failover keeps a client's one gRPC connection on a server replica
// that answers, for the runner and the chat bridges.
//
// A replica can fail without its connections failing: a blackholed link
// (no FIN, no RST) or a SIGSTOPped process leaves the TCP connection open
// and every stream on it silent. Dial's options make such a replica cost
// seconds, not a lease:
//
//   - keepalive pings (and, server side, an enforcement policy that allows
//     them) close a connection whose peer stopped answering;
//   - a probe (Book.Watch) asks the replica in use grpc.health.v1 Check
//     every second: two answers missing in a row, or NOT_SERVING while
//     another replica is known, and the replica is avoided — its
//     connections are closed, so every stream on it fails at once and is
//     made again elsewhere;
//   - the dialer refuses an avoided address for a while (Options.Avoid)
//     as long as another address of the server is not avoided, so the next
//     connection goes to another replica instead of the dead one first;
//   - a stream that a replica ends because it is stopping (the trailer
//     StoppingKey, set by the server's drain) marks that replica avoided too;
//   - every unary call without a deadline gets one (Options.UnaryTimeout);
//   - --server may list several addresses ("a:7443,b:7443"), and a DNS
//     name's addresses are all used: pick_first with its list shuffled, so
//     clients spread over the replicas.
package failover

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
)

// StoppingKey is the trailer a stopping replica puts on the streams it ends:
// the client should reconnect, to another replica.
const StoppingKey = "clawguard-replica-stopping"

// Keepalive is what clients send: a ping after 10 s without activity (the
// least grpc-go allows), the connection closed 5 s after an unanswered one.
var Keepalive = keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}

// Options tune a Book; zero values take the defaults.
type Options struct {
	Log *slog.Logger
	// Avoid is how long an address that hung, failed or said it is
	// stopping is not dialled while another is available (default 30 s).
	Avoid time.Duration
	// Probe is how often the replica in use is asked for its health
	// (default 1 s); ProbeTimeout bounds each answer (default 1 s).
	Probe, ProbeTimeout time.Duration
	// UnaryTimeout is the deadline of a unary call made without one
	// (default 15 s).
	UnaryTimeout time.Duration
	// OnAvoid is told of each replica avoided and why (metrics, logs).
	OnAvoid func(addr, why string)
	// Ordered keeps the addresses in their order (the first that answers is
	// used: a preferred replica) instead of shuffling them (a fleet spreads).
	Ordered bool
}

func (o *Options) defaults() {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Avoid <= 0 {
		o.Avoid = 30 * time.Second
	}
	if o.Probe <= 0 {
		o.Probe = time.Second
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = time.Second
	}
	if o.UnaryTimeout <= 0 {
		o.UnaryTimeout = 15 * time.Second
	}
}

// Book is what a client knows of the server's addresses: which it avoids
// until when, and its open connections to each.
type Book struct {
	opts   Options
	server string // as given: host:port or a comma-separated list
	now    func() time.Time

	mu    sync.Mutex
	known map[string]bool              // addresses listed, resolved or dialled
	bad   map[string]time.Time         // address → avoided until
	conns map[string]map[*tracked]bool // open connections by address
}

// New makes the book of server (host:port, or several separated by commas).
func New(server string, o Options) (*Book, error) {
	o.defaults()
	b := &Book{opts: o, server: server, now: time.Now, known: map[string]bool{}, bad: map[string]time.Time{},
		conns: map[string]map[*tracked]bool{}}
	list := b.list()
	if len(list) == 0 {
		return nil, fmt.Errorf("server address %q: none given", server)
	}
	for _, a := range list {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, fmt.Errorf("server address %q: %w", a, err)
		}
	}
	b.learn()
	return b, nil
}

// list is the server's addresses as given.
func (b *Book) list() []string {
	var out []string
	for _, a := range strings.Split(b.server, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// DialOptions are the connection's target and options: the address list
// (a manual resolver for several, DNS for one name), pick_first shuffled,
// keepalives, the dialer that refuses avoided addresses, and the interceptors
// that give unary calls a deadline and notice a stopping replica.
func (b *Book) DialOptions() (string, []grpc.DialOption) {
	opts := []grpc.DialOption{
		grpc.WithKeepaliveParams(Keepalive),
		grpc.WithContextDialer(b.dial),
		grpc.WithDefaultServiceConfig(fmt.Sprintf(`{"loadBalancingConfig":[{"pick_first":{"shuffleAddressList":%t}}]}`, !b.opts.Ordered)),
		grpc.WithChainUnaryInterceptor(b.unaryDeadline),
		grpc.WithChainStreamInterceptor(b.streamStopping),
	}
	list := b.list()
	if len(list) == 1 {
		return "dns:///" + list[0], opts
	}
	r := manual.NewBuilderWithScheme("clawguard-servers")
	addrs := make([]resolver.Address, len(list))
	for i, a := range list {
		addrs[i] = resolver.Address{Addr: a}
	}
	state := resolver.State{Addresses: addrs}
	r.InitialState(state)
	// Asked again (the connection went idle: a GOAWAY), the list is given
	// again, so pick_first shuffles it anew and the next replica is random.
	r.ResolveNowCallback = func(resolver.ResolveNowOptions) { go r.UpdateState(state) }
	return r.Scheme() + ":///servers", append(opts, grpc.WithResolvers(r))
}

// Avoided reports whether addr is avoided now.
func (b *Book) Avoided(addr string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.avoidedLocked(addr)
}

func (b *Book) avoidedLocked(addr string) bool {
	until, ok := b.bad[addr]
	return ok && b.now().Before(until)
}

// otherAvailableLocked: some known address other than addr is not avoided.
func (b *Book) otherAvailableLocked(addr string) bool {
	for a := range b.known {
		if a != addr && !b.avoidedLocked(a) {
			return true
		}
	}
	return false
}

// Avoid marks addr avoided for Options.Avoid and, with closeConns, closes
// its open connections (every stream on them fails at once and is made
// again, elsewhere). It reports whether another address is available.
func (b *Book) Avoid(addr, why string, closeConns bool) bool {
	b.learn()
	b.mu.Lock()
	b.known[addr] = true
	b.bad[addr] = b.now().Add(b.opts.Avoid)
	other := b.otherAvailableLocked(addr)
	var open []*tracked
	if closeConns {
		for c := range b.conns[addr] {
			open = append(open, c)
		}
	}
	b.mu.Unlock()
	b.opts.Log.Warn("server replica avoided; moving to another", "addr", addr, "why", why,
		"another_available", other, "connections_closed", len(open), "for", b.opts.Avoid)
	for _, c := range open {
		_ = c.Conn.Close()
	}
	if b.opts.OnAvoid != nil {
		b.opts.OnAvoid(addr, why)
	}
	return other
}

// learn adds the addresses the dialer is asked for: a list's entries as
// given, or what the one name resolves to now (a DNS name with several
// addresses: the others are where to go).
func (b *Book) learn() {
	list := b.list()
	if len(list) > 1 {
		b.mu.Lock()
		for _, a := range list {
			b.known[a] = true
		}
		b.mu.Unlock()
		return
	}
	for _, a := range list {
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			continue
		}
		if net.ParseIP(host) != nil {
			b.mu.Lock()
			b.known[a] = true
			b.mu.Unlock()
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		ips, err := net.DefaultResolver.LookupHost(ctx, host)
		cancel()
		if err != nil {
			continue
		}
		b.mu.Lock()
		for _, ip := range ips {
			b.known[net.JoinHostPort(ip, port)] = true
		}
		b.mu.Unlock()
	}
}

// dial is the connection's dialer: an avoided address is refused at once
// while another is available; a failed dial avoids its address.
func (b *Book) dial(ctx context.Context, addr string) (net.Conn, error) {
	b.mu.Lock()
	b.known[addr] = true
	refuse := b.avoidedLocked(addr) && b.otherAvailableLocked(addr)
	b.mu.Unlock()
	if refuse {
		return nil, fmt.Errorf("server replica %s is avoided (it hung, failed or is stopping); trying another", addr)
	}
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		if ctx.Err() == nil { // not a dial another address won
			b.mu.Lock()
			b.bad[addr] = b.now().Add(b.opts.Avoid)
			b.mu.Unlock()
		}
		return nil, err
	}
	t := &tracked{Conn: c, addr: addr, book: b}
	b.mu.Lock()
	if b.conns[addr] == nil {
		b.conns[addr] = map[*tracked]bool{}
	}
	b.conns[addr][t] = true
	b.mu.Unlock()
	return t, nil
}

// tracked is an open connection the book can close.
type tracked struct {
	net.Conn
	addr string
	book *Book
	once sync.Once
}

func (t *tracked) Close() error {
	t.once.Do(func() {
		t.book.mu.Lock()
		delete(t.book.conns[t.addr], t)
		t.book.mu.Unlock()
	})
	return t.Conn.Close()
}

// openAddrs are the addresses with open connections.
func (b *Book) openAddrs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for a, cs := range b.conns {
		if len(cs) > 0 {
			out = append(out, a)
		}
	}
	return out
}
