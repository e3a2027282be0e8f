package ncl

import (
	"context"
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
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// pki is a throwaway CA with one server and one client certificate.
type pki struct {
	dir                       string
	caFile, certFile, keyFile string // client
	serverCert                tls.Certificate
	pool                      *x509.CertPool
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, name string, usage x509.ExtKeyUsage) ([]byte, *ecdsa.PrivateKey) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{usage},
			KeyUsage: x509.KeyUsageDigitalSignature}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, key
	}
	p := &pki{dir: dir, pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	srvDER, srvKey := issue(2, "guard.test", x509.ExtKeyUsageServerAuth)
	p.serverCert = tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}
	cliDER, cliKey := issue(3, "ncl", x509.ExtKeyUsageClientAuth)
	keyDER, _ := x509.MarshalECPrivateKey(cliKey)
	p.caFile = writePEM(t, dir, "ca.pem", "CERTIFICATE", caDER)
	p.certFile = writePEM(t, dir, "client.pem", "CERTIFICATE", cliDER)
	p.keyFile = writePEM(t, dir, "client.key", "EC PRIVATE KEY", keyDER)
	return p
}

func writePEM(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestMutualTLS: with the CA, server name and a client certificate ncl
// reaches a server that requires client certificates; without the CA it
// does not (plaintext against TLS), and says so with exit 2.
func TestMutualTLS(t *testing.T) {
	p := newPKI(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{p.serverCert}, ClientCAs: p.pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12})
	s := grpc.NewServer(grpc.Creds(creds))
	guardv1.RegisterRegistryServer(s, &fakeServer{})
	go s.Serve(l)
	t.Cleanup(s.Stop)

	env := envOf(map[string]string{"CLAWGUARD_SERVER": l.Addr().String(), "CLAWGUARD_TOKEN": "t", "HOME": t.TempDir(),
		"CLAWGUARD_TLS_CA": p.caFile, "CLAWGUARD_TLS_SERVER_NAME": "guard.test"})
	r := runNcl(context.Background(), env, "groups", "get", "ag_1", "-q", "--tls-cert", p.certFile, "--tls-key", p.keyFile)
	if r.code != 0 || strings.TrimSpace(r.out) != "ag_1" {
		t.Errorf("mutual TLS: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	r = runNcl(context.Background(), env, "groups", "get", "ag_1", "--timeout", "5s")
	if r.code != ExitUsage {
		t.Errorf("without a client certificate: exit %d (%s), want %d", r.code, r.err, ExitUsage)
	}
	plain := envOf(map[string]string{"CLAWGUARD_SERVER": l.Addr().String(), "CLAWGUARD_TOKEN": "t", "HOME": t.TempDir()})
	r = runNcl(context.Background(), plain, "groups", "get", "ag_1", "--timeout", "5s")
	if r.code != ExitUsage || !strings.Contains(r.err, "cannot reach server") {
		t.Errorf("plaintext against TLS: exit %d, %q", r.code, r.err)
	}
	r = runNcl(context.Background(), env, "groups", "get", "ag_1", "--tls-server-name", "other.test", "--tls-cert", p.certFile, "--tls-key", p.keyFile)
	if r.code != ExitUsage {
		t.Errorf("wrong server name: exit %d (%s), want %d", r.code, r.err, ExitUsage)
	}
}
