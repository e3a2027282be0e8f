package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/clawguard/clawguard/proto/failover"
	"github.com/clawguard/clawguard/proto/telemetry"
	"github.com/clawguard/clawguard/proto/tlsfiles"
	"github.com/clawguard/clawguard/runner/internal/config"
)

// bearer sends the runner token on every call.
type bearer struct {
	token  string
	secure bool
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

func (b bearer) RequireTransportSecurity() bool { return b.secure }

func newInstanceID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "inst_" + hex.EncodeToString(b)
}

// transportCredentials is plaintext without --tls-ca; with it, TLS verified
// against that CA, presenting --tls-cert to a server that requires client
// certificates (mTLS). Both follow their files: a CA bundle or certificate
// replaced on disk is used from the next connection on, with no restart.
func transportCredentials(cfg config.Config) (credentials.TransportCredentials, bool, error) {
	if cfg.TLSCA == "" {
		return insecure.NewCredentials(), false, nil
	}
	src, err := tlsfiles.Load(tlsfiles.Files{Cert: cfg.TLSCert, Key: cfg.TLSKey, CA: cfg.TLSCA})
	if err != nil {
		return nil, false, fmt.Errorf("--tls-ca/--tls-cert/--tls-key: %w", err)
	}
	src.OnReloadError = func(err error) {
		slog.Warn("TLS files changed but do not load; using the last good ones", "err", err)
	}
	return src.ClientCredentials(cfg.TLSServerName), true, nil
}

// dial is the runner's one connection to the server: its token on every
// call, its transport's credentials, fixed flow-control windows, and the
// failover book's address list, keepalives, dialer and deadlines (a
// replica that hangs is left in seconds; see proto/failover).
func dial(cfg config.Config, token string, tracing *telemetry.Tracing, log *slog.Logger) (*grpc.ClientConn, *failover.Book, error) {
	creds, secure, err := transportCredentials(cfg)
	if err != nil {
		return nil, nil, err
	}
	book, err := failover.New(cfg.Server, failover.Options{Log: log, Ordered: cfg.ServerPick == "first"})
	if err != nil {
		return nil, nil, fmt.Errorf("--server: %w", err)
	}
	target, fopts := book.DialOptions()
	conn, err := grpc.NewClient(target, append(append([]grpc.DialOption{grpc.WithTransportCredentials(creds),
		grpc.WithPerRPCCredentials(bearer{token: token, secure: secure}),
		// Fixed flow-control windows, as the server's: no BDP pings and
		// window updates (a write and a wake-up each) on the decision stream.
		grpc.WithInitialWindowSize(1 << 20), grpc.WithInitialConnWindowSize(8 << 20)},
		fopts...), tracing.DialOptions()...)...)
	if err != nil {
		return nil, nil, fmt.Errorf("--server: %w", err)
	}
	return conn, book, nil
}
