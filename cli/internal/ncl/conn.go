package ncl

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/clawguard/clawguard/cli/internal/config"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/telemetry"
)

// connError is a failure before any server answer: config, token, TLS
// material, dial (exit 2).
type connError struct{ err error }

func (e connError) Error() string { return e.err.Error() }
func (e connError) Unwrap() error { return e.err }

// connect resolves settings and dials once per invocation.
func (a *app) connect() (*clients, error) {
	if a.clients != nil {
		return a.clients, nil
	}
	s, err := config.Resolve(a.flags, a.getenv)
	if err != nil {
		return nil, connError{err}
	}
	if s.Token == "" {
		return nil, connError{config.ErrNoToken}
	}
	a.settings = s
	creds, err := transportCreds(s)
	if err != nil {
		return nil, connError{err}
	}
	// Traced only when the standard OTEL_EXPORTER_OTLP_ENDPOINT is set:
	// each call is a client span the server's continue.
	tracing, err := telemetry.SetupFromEnv(context.Background(), "ncl", Version)
	if err != nil {
		return nil, connError{err}
	}
	a.tracing = tracing
	conn, err := grpc.NewClient(s.Server, append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithPerRPCCredentials(bearer{token: s.Token, secure: s.TLSCA != ""}),
		grpc.WithUserAgent("ncl/" + Version),
	}, tracing.DialOptions()...)...)
	if err != nil {
		return nil, connError{fmt.Errorf("dial %s: %w", s.Server, err)}
	}
	a.conn = conn
	a.clients = &clients{
		reg:    guardv1.NewRegistryClient(conn),
		appr:   guardv1.NewApprovalsClient(conn),
		guard:  guardv1.NewGuardClient(conn),
		stderr: a.stderr,
	}
	return a.clients, nil
}

// transportCreds: plaintext unless a CA is given (the server's default
// listener is plaintext on loopback); with a CA, TLS verified against it and
// an optional client certificate for servers started with --tls-client-ca.
func transportCreds(s config.Settings) (credentials.TransportCredentials, error) {
	if s.TLSCA == "" {
		if s.TLSCert != "" {
			return nil, errors.New("--tls-cert needs --tls-ca (TLS is only used when a CA is given)")
		}
		return insecure.NewCredentials(), nil
	}
	pem, err := os.ReadFile(s.TLSCA)
	if err != nil {
		return nil, fmt.Errorf("read TLS CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("TLS CA %s holds no PEM certificate", s.TLSCA)
	}
	cfg := &tls.Config{RootCAs: pool, ServerName: s.TLSServerName, MinVersion: tls.VersionTLS12}
	if s.TLSCert != "" {
		pair, err := tls.LoadX509KeyPair(s.TLSCert, s.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("load TLS client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return credentials.NewTLS(cfg), nil
}

// bearer sends the token on every call as "authorization: Bearer <token>".
type bearer struct {
	token  string
	secure bool
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

// RequireTransportSecurity is false so the plaintext loopback default works;
// TLS is the operator's choice through --tls-ca.
func (b bearer) RequireTransportSecurity() bool { return b.secure }
