package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/clawguard/clawguard/migrations/pgtest"
)

// testPKI is a throwaway CA, a server certificate for 127.0.0.1 and one
// client certificate, written as PEM files the way deploy/TLS.md makes them.
type testPKI struct {
	ca, serverCert, serverKey, clientCert, clientKey string
	pool                                             *x509.CertPool
	client                                           tls.Certificate
	// reissueServer writes a new server certificate (with this serial) and
	// key over the old files, as a renewal does.
	reissueServer func(serial int64)
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "clawguard test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	p := testPKI{ca: write("ca.crt", "CERTIFICATE", caDER), pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	issue := func(serial int64, name string, usage x509.ExtKeyUsage, ips ...net.IP) (certFile, keyFile string) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
			IPAddresses: ips, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kb, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return write(name+".crt", "CERTIFICATE", der), write(name+".key", "PRIVATE KEY", kb)
	}
	p.serverCert, p.serverKey = issue(2, "clawguard-server", x509.ExtKeyUsageServerAuth, net.ParseIP("127.0.0.1"))
	p.reissueServer = func(serial int64) {
		issue(serial, "clawguard-server", x509.ExtKeyUsageServerAuth, net.ParseIP("127.0.0.1"))
	}
	p.clientCert, p.clientKey = issue(3, "runner-1", x509.ExtKeyUsageClientAuth)
	if p.client, err = tls.LoadX509KeyPair(p.clientCert, p.clientKey); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestMutualTLSEndToEnd: a server started with --tls-client-ca serves the
// gRPC health probe, ncl and a runner that present a client certificate,
// refuses a client without one, and reports ready on plaintext /readyz
// (what a kubelet or load balancer probes when the gRPC port needs mTLS).
func TestMutualTLSEndToEnd(t *testing.T) {
	pki := newTestPKI(t)
	db := pgtest.NewDB(t)
	addr, metricsAddr, consoleAddr := loopback(t), loopback(t), loopback(t)
	tokenFile := filepath.Join(t.TempDir(), "operator.token")
	srv := start(t, "server", nil, bin(t, "clawguard-server"), "serve", "--database-url", db, "--auto-migrate",
		"--listen", addr, "--metrics-listen", metricsAddr, "--operator-token-file", tokenFile, "--console-listen", consoleAddr,
		"--tls-cert", pki.serverCert, "--tls-key", pki.serverKey, "--tls-client-ca", pki.ca)

	// The health probe, with a client certificate.
	healthOver := func(certs ...tls.Certificate) (healthpb.HealthCheckResponse_ServingStatus, error) {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(
			&tls.Config{RootCAs: pki.pool, Certificates: certs, MinVersion: tls.VersionTLS12})))
		if err != nil {
			return 0, err
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		res, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		return res.GetStatus(), err
	}
	waitFor(t, 60*time.Second, "SERVING over mTLS", func() (bool, string) {
		if srv.Exited() {
			t.Fatalf("server exited:\n%s", srv.Tail(30))
		}
		st, err := healthOver(pki.client)
		return err == nil && st == healthpb.HealthCheckResponse_SERVING, fmt.Sprint(st, err)
	})
	if _, err := healthOver(); err == nil {
		t.Fatal("a client without a certificate passed the mTLS handshake")
	}
	waitFor(t, 10*time.Second, "/readyz 200", func() (bool, string) {
		code, err := httpStatus("http://" + metricsAddr + "/readyz")
		return err == nil && code == http.StatusOK, fmt.Sprint(code, err)
	})

	consoleWithoutClientCert(t, pki, consoleAddr)

	// ncl over mTLS; without its certificate it is refused.
	n := nclFor(t, &server{proc: srv, addr: addr, metrics: metricsAddr, tokenFile: tokenFile})
	n.env = []string{"CLAWGUARD_TLS_CA=" + pki.ca, "CLAWGUARD_TLS_CERT=" + pki.clientCert, "CLAWGUARD_TLS_KEY=" + pki.clientKey}
	group := n.must(t, "groups", "create", "--name", "secure", "--cli-scope", "group", "-q")
	noCert := n
	noCert.env = []string{"CLAWGUARD_TLS_CA=" + pki.ca}
	if out, errOut, code := noCert.run("groups", "list"); code == 0 {
		t.Fatalf("ncl without a client certificate succeeded: %s %s", out, errOut)
	}

	// A runner over mTLS registers, connects (its /readyz) and hosts the group.
	runnerMetrics := loopback(t)
	tok := runnerToken(t, n, "runner-1")
	dataDir := runnerDataDir(t)
	r := start(t, "runner-1", nil, bin(t, "clawguard-runner"), "--server", addr, "--token-file", tok, "--id", "runner-1",
		"--runtime", "process", "--agent-binary", bin(t, "demo-agent"), "--data-dir", dataDir, "--metrics-listen", runnerMetrics,
		"--agent-env", "CLAWGUARD_DEMO_SCRIPT=[]", "--group", group,
		"--tls-ca", pki.ca, "--tls-cert", pki.clientCert, "--tls-key", pki.clientKey)
	waitFor(t, 60*time.Second, "runner /readyz 200 over mTLS", func() (bool, string) {
		if r.Exited() {
			t.Fatalf("runner exited:\n%s", r.Tail(30))
		}
		code, err := httpStatus("http://" + runnerMetrics + "/readyz")
		return err == nil && code == http.StatusOK, fmt.Sprint(code, err)
	})
	waitFor(t, 30*time.Second, "the runner's session listed", func() (bool, string) {
		out, errOut, _ := n.run("sessions", "list", "--group", group)
		return strings.Contains(out, "runner-1"), out + errOut
	})

	// Issue 33: a server certificate replaced on disk is served to the next
	// connection with no restart, and the connections already up (the
	// runner's streams) go on.
	pki.reissueServer(20)
	waitFor(t, 10*time.Second, "the renewed certificate served to a new connection", func() (bool, string) {
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pki.pool, Certificates: []tls.Certificate{pki.client}, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12})
		if err != nil {
			return false, err.Error()
		}
		defer conn.Close()
		serial := conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
		return serial == 20, fmt.Sprint("serial ", serial)
	})
	if srv.Exited() {
		t.Fatal("the server exited on a certificate renewal")
	}
	if code, err := httpStatus("http://" + runnerMetrics + "/readyz"); err != nil || code != http.StatusOK {
		t.Fatalf("the runner's streams after the renewal: /readyz %d %v", code, err)
	}
	n.must(t, "groups", "get", group)
}

// consoleWithoutClientCert: the console serves the server's certificate
// but asks a browser for no client certificate, even with --tls-client-ca
// (issue 45: its users sign in with tokens).
func consoleWithoutClientCert(t *testing.T, pki testPKI, addr string) {
	t.Helper()
	browser := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.pool, MinVersion: tls.VersionTLS12}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := browser.Get("https://" + addr + "/")
	if err != nil {
		t.Fatalf("the console over TLS without a client certificate: %v", err)
	}
	res.Body.Close()
	if res.StatusCode >= 500 {
		t.Fatalf("the console answered %d", res.StatusCode)
	}
}

func httpStatus(url string) (int, error) {
	c := http.Client{Timeout: 2 * time.Second}
	res, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	res.Body.Close()
	return res.StatusCode, nil
}
