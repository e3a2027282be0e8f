// Package tlsfiles is a TLS configuration read from files that follows them:
// a certificate, key or CA bundle replaced on disk (a cert-manager renewal, a
// Kubernetes secret's symlink swap) is used from the next handshake on, with
// no restart; connections already up keep the certificate they agreed on.
//
// The files are read again at most once per CheckEvery, and only when a
// handshake asks. A replacement that does not load (a key written before its
// certificate, a truncated file) is not used: the last good set stays in
// force and the error is reported through OnReloadError, so a rotation caught
// half-way costs nothing and the next check picks up the finished one.
package tlsfiles

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"
)

// CheckEvery bounds how often the files are read again.
const CheckEvery = time.Second

// Files names a certificate with its key, and a CA bundle. Cert and Key go
// together; any of the three may be empty.
type Files struct {
	Cert, Key string
	// CA verifies the peer: the server's certificate for a client, client
	// certificates for a server (which then requires one).
	CA string
}

// Source holds the files' current contents.
type Source struct {
	files Files
	now   func() time.Time
	// OnReloadError, when set, hears of a replacement that did not load.
	OnReloadError func(error)

	mu      sync.Mutex
	checked time.Time
	raw     [3][]byte // cert, key, CA as last read
	cur     *loaded
}

type loaded struct {
	cert *tls.Certificate
	pool *x509.CertPool
}

// Load reads the files once; an error here is a configuration error (the
// caller should refuse to start).
func Load(f Files) (*Source, error) {
	if (f.Cert == "") != (f.Key == "") {
		return nil, errors.New("a TLS certificate and its key go together")
	}
	s := &Source{files: f, now: time.Now}
	raw, err := s.read()
	if err != nil {
		return nil, err
	}
	cur, err := parse(f, raw)
	if err != nil {
		return nil, err
	}
	s.raw, s.cur, s.checked = raw, cur, s.now()
	return s, nil
}

func (s *Source) read() ([3][]byte, error) {
	var raw [3][]byte
	for i, name := range []string{s.files.Cert, s.files.Key, s.files.CA} {
		if name == "" {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			return raw, fmt.Errorf("read %s: %w", name, err)
		}
		raw[i] = b
	}
	return raw, nil
}

func parse(f Files, raw [3][]byte) (*loaded, error) {
	var l loaded
	if f.Cert != "" {
		pair, err := tls.X509KeyPair(raw[0], raw[1])
		if err != nil {
			return nil, fmt.Errorf("TLS key pair %s, %s: %w", f.Cert, f.Key, err)
		}
		l.cert = &pair
	}
	if f.CA != "" {
		l.pool = x509.NewCertPool()
		if !l.pool.AppendCertsFromPEM(raw[2]) {
			return nil, fmt.Errorf("TLS CA %s holds no PEM certificate", f.CA)
		}
	}
	return &l, nil
}

// current is the set in force, read again first when CheckEvery has passed.
func (s *Source) current() *loaded {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := s.now(); now.Sub(s.checked) >= CheckEvery {
		s.checked = now
		raw, err := s.read()
		if err == nil && !sameBytes(raw, s.raw) {
			var next *loaded
			if next, err = parse(s.files, raw); err == nil {
				s.raw, s.cur = raw, next
			}
		}
		if err != nil && s.OnReloadError != nil {
			s.OnReloadError(err)
		}
	}
	return s.cur
}

func sameBytes(a, b [3][]byte) bool {
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// ServerConfig serves the current certificate; with a CA it requires a
// client certificate and verifies it against the current bundle.
//
// The certificate comes from GetCertificate and the client's chain is
// verified in VerifyPeerCertificate (with the standard checks: the chain to
// the bundle, validity, client-auth usage), so the returned configuration
// is the one its user extends (gRPC and net/http add their ALPN protocols to
// it), where a GetConfigForClient answer would replace it.
func (s *Source) ServerConfig() *tls.Config {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.files.Cert != "" {
		c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return s.current().cert, nil }
	}
	if s.files.CA == "" {
		return c
	}
	c.ClientAuth = tls.RequireAnyClientCert // verified below, against the bundle in force
	c.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return errors.New("tls: a client certificate is required")
		}
		certs := make([]*x509.Certificate, len(raw))
		for i, der := range raw {
			cert, err := x509.ParseCertificate(der)
			if err != nil {
				return fmt.Errorf("tls: client certificate: %w", err)
			}
			certs[i] = cert
		}
		inter := x509.NewCertPool()
		for _, ic := range certs[1:] {
			inter.AddCert(ic)
		}
		_, err := certs[0].Verify(x509.VerifyOptions{Roots: s.current().pool, Intermediates: inter,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		return err
	}
	return c
}

// ClientConfig is a configuration for one connection: it verifies the
// server against the CA bundle in force now (as name serverName, or the name
// dialled when empty; without a CA file, the system's roots) and presents the
// current certificate when one is configured and the server asks. A
// long-lived client takes ClientCredentials, which asks for a fresh one at
// every handshake.
func (s *Source) ClientConfig(serverName string) *tls.Config {
	cur := s.current()
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName, RootCAs: cur.pool}
	if s.files.Cert != "" {
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return s.current().cert, nil
		}
	}
	return c
}

// ClientCredentials are gRPC transport credentials that follow the files:
// each new connection's handshake is made with ClientConfig as it is then,
// so a CA bundle or client certificate rotated on disk is used from the next
// connection on, with the standard verification.
func (s *Source) ClientCredentials(serverName string) credentials.TransportCredentials {
	return &clientCredentials{TransportCredentials: credentials.NewTLS(s.ClientConfig(serverName)), s: s, serverName: serverName}
}

type clientCredentials struct {
	credentials.TransportCredentials // Info and the server side; never used to handshake
	s                                *Source
	serverName                       string
}

func (c *clientCredentials) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return credentials.NewTLS(c.s.ClientConfig(c.serverName)).ClientHandshake(ctx, authority, conn)
}

func (c *clientCredentials) Clone() credentials.TransportCredentials {
	return &clientCredentials{TransportCredentials: c.TransportCredentials.Clone(), s: c.s, serverName: c.serverName}
}
