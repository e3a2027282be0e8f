package tlsfiles

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

var serial atomic.Int64

func newCA(t *testing.T, name string) *ca {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &ca{cert: c, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// leaf issues a certificate for 127.0.0.1 (server and client use); its
// serial tells which one a peer presented.
func (c *ca) leaf(t *testing.T) (certPEM, keyPEM []byte, serialNo int64) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serialNo = serial.Add(1)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serialNo), Subject: pkix.Name{CommonName: "leaf"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"clawguard.test"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), serialNo
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	// As a rotation does: a new file renamed over the old one.
	tmp := path + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// clock is a Source's time, moved by the test past CheckEvery.
type clock struct{ t atomic.Int64 }

func (c *clock) now() time.Time     { return time.Unix(0, c.t.Load()) }
func (c *clock) tick()              { c.t.Add(int64(CheckEvery)) }
func withClock(s *Source, c *clock) { c.t.Store(time.Now().UnixNano()); s.now = c.now }

// echoServer answers each line with "ok", over TLS from src.
func echoServer(t *testing.T, src *Source) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", src.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				tc := conn.(*tls.Conn)
				r := bufio.NewReader(tc)
				for {
					if _, err := r.ReadString('\n'); err != nil {
						return
					}
					if _, err := tc.Write([]byte("ok\n")); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends a line and reads the answer on an open connection.
func roundTrip(t *testing.T, c *tls.Conn) {
	t.Helper()
	if _, err := c.Write([]byte("ping\n")); err != nil {
		t.Fatalf("write on an open connection: %v", err)
	}
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || line != "ok\n" {
		t.Fatalf("read on an open connection: %q %v", line, err)
	}
}

func dial(addr string, cfg *tls.Config) (*tls.Conn, error) {
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	return c, c.Handshake()
}

func servedSerial(c *tls.Conn) int64 {
	return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// Issue 33: a certificate replaced on disk is served to the next connection,
// with no restart; the connection already up keeps working.
func TestAReplacedCertificateIsServedToTheNextConnection(t *testing.T) {
	dir := t.TempDir()
	root := newCA(t, "root")
	cert, key, first := root.leaf(t)
	files := Files{Cert: filepath.Join(dir, "tls.crt"), Key: filepath.Join(dir, "tls.key"), CA: filepath.Join(dir, "ca.crt")}
	write(t, files.Cert, cert)
	write(t, files.Key, key)
	write(t, files.CA, root.pem)
	server, err := Load(Files{Cert: files.Cert, Key: files.Key})
	if err != nil {
		t.Fatal(err)
	}
	var clk clock
	withClock(server, &clk)
	client, err := Load(Files{CA: files.CA})
	if err != nil {
		t.Fatal(err)
	}
	addr := echoServer(t, server)

	before, err := dial(addr, client.ClientConfig(""))
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()
	if got := servedSerial(before); got != first {
		t.Fatalf("served serial %d, want %d", got, first)
	}

	cert2, key2, second := root.leaf(t)
	write(t, files.Cert, cert2)
	write(t, files.Key, key2)
	// Not read again before CheckEvery: the old one is still served.
	if c, err := dial(addr, client.ClientConfig("")); err != nil || servedSerial(c) != first {
		t.Fatalf("within CheckEvery: %v", err)
	}
	clk.tick()
	after, err := dial(addr, client.ClientConfig(""))
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	if got := servedSerial(after); got != second {
		t.Fatalf("after the rotation the next connection got serial %d, want the new %d", got, second)
	}
	roundTrip(t, before)
}

// A replacement caught half-way (a new certificate before its key) is not
// used: the last good pair is served and the error reported; the finished
// rotation is picked up at the next check.
func TestAHalfWrittenRotationKeepsTheLastGoodPair(t *testing.T) {
	dir := t.TempDir()
	root := newCA(t, "root")
	cert, key, first := root.leaf(t)
	files := Files{Cert: filepath.Join(dir, "tls.crt"), Key: filepath.Join(dir, "tls.key")}
	write(t, files.Cert, cert)
	write(t, files.Key, key)
	server, err := Load(files)
	if err != nil {
		t.Fatal(err)
	}
	var clk clock
	withClock(server, &clk)
	var reported atomic.Int32
	server.OnReloadError = func(error) { reported.Add(1) }
	caFile := filepath.Join(dir, "ca.crt")
	write(t, caFile, root.pem)
	client, _ := Load(Files{CA: caFile})
	addr := echoServer(t, server)

	cert2, key2, second := root.leaf(t)
	write(t, files.Cert, cert2) // its key not yet
	clk.tick()
	c, err := dial(addr, client.ClientConfig(""))
	if err != nil || servedSerial(c) != first {
		t.Fatalf("half-way: %v, want the last good certificate served", err)
	}
	if reported.Load() == 0 {
		t.Error("a replacement that did not load was not reported")
	}
	write(t, files.Key, key2)
	clk.tick()
	if c, err := dial(addr, client.ClientConfig("")); err != nil || servedSerial(c) != second {
		t.Fatalf("finished rotation: %v", err)
	}
}

// A client's CA bundle rotates too: a server certificate of a new CA is
// refused until the client's bundle names that CA, then accepted without a
// restart. A name the certificate does not carry is refused.
func TestAClientFollowsItsCABundle(t *testing.T) {
	dir := t.TempDir()
	oldCA, newerCA := newCA(t, "old"), newCA(t, "new")
	files := Files{Cert: filepath.Join(dir, "tls.crt"), Key: filepath.Join(dir, "tls.key")}
	cert, key, _ := newerCA.leaf(t)
	write(t, files.Cert, cert)
	write(t, files.Key, key)
	server, err := Load(files)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.crt")
	write(t, caFile, oldCA.pem)
	client, err := Load(Files{CA: caFile})
	if err != nil {
		t.Fatal(err)
	}
	var clk clock
	withClock(client, &clk)
	addr := echoServer(t, server)

	if _, err := dial(addr, client.ClientConfig("")); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Fatalf("a certificate of a CA the bundle lacks: %v, want unknown authority", err)
	}
	write(t, caFile, append(append([]byte{}, oldCA.pem...), newerCA.pem...))
	clk.tick()
	if _, err := dial(addr, client.ClientConfig("")); err != nil {
		t.Fatalf("after the bundle gained the new CA: %v", err)
	}
	if _, err := dial(addr, client.ClientConfig("other.test")); err == nil {
		t.Fatal("a server name the certificate lacks was accepted")
	}
	if _, err := dial(addr, client.ClientConfig("clawguard.test")); err != nil {
		t.Fatalf("a server name the certificate carries: %v", err)
	}
}

// With a CA, the server requires a client certificate of it, and follows a
// rotation of the client's certificate.
func TestMutualTLSFollowsBothSides(t *testing.T) {
	dir := t.TempDir()
	root := newCA(t, "root")
	caFile := filepath.Join(dir, "ca.crt")
	write(t, caFile, root.pem)
	scert, skey, _ := root.leaf(t)
	sfiles := Files{Cert: filepath.Join(dir, "s.crt"), Key: filepath.Join(dir, "s.key"), CA: caFile}
	write(t, sfiles.Cert, scert)
	write(t, sfiles.Key, skey)
	server, err := Load(sfiles)
	if err != nil {
		t.Fatal(err)
	}
	addr := echoServer(t, server)
	anonymous, _ := Load(Files{CA: caFile})
	if !refused(addr, anonymous.ClientConfig("")) {
		t.Fatal("a client without a certificate was served")
	}
	ccert, ckey, _ := root.leaf(t)
	cfiles := Files{Cert: filepath.Join(dir, "c.crt"), Key: filepath.Join(dir, "c.key"), CA: caFile}
	write(t, cfiles.Cert, ccert)
	write(t, cfiles.Key, ckey)
	client, err := Load(cfiles)
	if err != nil {
		t.Fatal(err)
	}
	c, err := dial(addr, client.ClientConfig(""))
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, c)

	// Client certificates move to a new CA: refused until the server's
	// bundle names it, then accepted with no restart.
	var clk clock
	withClock(server, &clk)
	next := newCA(t, "next")
	ncert, nkey, _ := next.leaf(t)
	write(t, cfiles.Cert, ncert)
	write(t, cfiles.Key, nkey)
	moved, err := Load(Files{Cert: cfiles.Cert, Key: cfiles.Key, CA: caFile})
	if err != nil {
		t.Fatal(err)
	}
	if !refused(addr, moved.ClientConfig("")) {
		t.Fatal("a client certificate of a CA the server's bundle lacks was served")
	}
	write(t, caFile, append(append([]byte{}, root.pem...), next.pem...))
	clk.tick()
	c, err = dial(addr, moved.ClientConfig(""))
	if err != nil {
		t.Fatalf("after the server's bundle gained the new CA: %v", err)
	}
	roundTrip(t, c)
}

// refused: the handshake fails, or (TLS 1.3) the first round trip does.
func refused(addr string, cfg *tls.Config) bool {
	c, err := dial(addr, cfg)
	if err != nil {
		return true
	}
	defer c.Close()
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return true
	}
	_, err = bufio.NewReader(c).ReadString('\n')
	return err != nil
}

func TestLoadRefusesWhatCannotServe(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk")
	write(t, junk, []byte("not PEM"))
	for name, f := range map[string]Files{
		"a certificate without its key": {Cert: junk},
		"a missing file":                {CA: filepath.Join(dir, "absent")},
		"a CA file without a PEM":       {CA: junk},
		"a pair that does not parse":    {Cert: junk, Key: junk},
	} {
		if _, err := Load(f); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
}
