package bridge

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// Dial connects to the control plane with the bridge token: plaintext
// unless a CA is given (the server's default listener is loopback).
// userAgent names the bridge in the server's logs.
func Dial(cfg Config, userAgent string) (*grpc.ClientConn, error) {
	creds := insecure.NewCredentials()
	if cfg.TLSCA != "" {
		pem, err := os.ReadFile(cfg.TLSCA)
		if err != nil {
			return nil, fmt.Errorf("read TLS CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("TLS CA %s holds no PEM certificate", cfg.TLSCA)
		}
		creds = credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	}
	conn, err := grpc.NewClient(cfg.Server,
		grpc.WithTransportCredentials(creds),
		grpc.WithPerRPCCredentials(bearer{token: cfg.Token, secure: cfg.TLSCA != ""}),
		grpc.WithUserAgent(userAgent),
	)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", cfg.Server, err)
	}
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
