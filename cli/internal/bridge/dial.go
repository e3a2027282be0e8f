package bridge

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/clawguard/clawguard/proto/failover"
	"github.com/clawguard/clawguard/proto/telemetry"
	"github.com/clawguard/clawguard/proto/tlsfiles"
)

// Dial connects to the control plane with the bridge token: plaintext
// unless a CA is given (the server's default listener is loopback); with a
// client certificate for a server that requires mutual TLS. The CA and
// certificate follow their files: replaced on disk, they are used from the
// next connection on, with no restart. userAgent names the bridge in the
// server's logs.
func Dial(cfg Config, userAgent string) (*grpc.ClientConn, error) {
	creds := insecure.NewCredentials()
	if cfg.TLSCA != "" {
		src, err := tlsfiles.Load(tlsfiles.Files{Cert: cfg.TLSCert, Key: cfg.TLSKey, CA: cfg.TLSCA})
		if err != nil {
			return nil, fmt.Errorf("TLS files: %w", err)
		}
		src.OnReloadError = func(err error) {
			slog.Warn("TLS files changed but do not load; using the last good ones", "err", err)
		}
		creds = src.ClientCredentials("")
	}
	// Traced only when the standard OTEL_EXPORTER_OTLP_ENDPOINT is set; the
	// service is the user agent's name (clawguard-telegram, …).
	service, version, _ := strings.Cut(userAgent, "/")
	tracing, err := telemetry.SetupFromEnv(context.Background(), service, version)
	if err != nil {
		return nil, err
	}
	// Keepalives, a deadline on every unary call, and a replica that hangs
	// or stops left for another (proto/failover), watched for as long as
	// the connection is open.
	book, err := failover.New(cfg.Server, failover.Options{})
	if err != nil {
		return nil, fmt.Errorf("server %s: %w", cfg.Server, err)
	}
	target, fopts := book.DialOptions()
	conn, err := grpc.NewClient(target, append(append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithPerRPCCredentials(bearer{token: cfg.Token, secure: cfg.TLSCA != ""}),
		grpc.WithUserAgent(userAgent),
	}, fopts...), tracing.DialOptions()...)...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", cfg.Server, err)
	}
	go book.Watch(context.Background(), conn)
	return conn, nil
}

type bearer struct {
	token  string
	secure bool
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

func (b bearer) RequireTransportSecurity() bool { return b.secure }

// LogLevel maps a validated --log-level.
func LogLevel(s string) slog.Level {
	switch s {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}
