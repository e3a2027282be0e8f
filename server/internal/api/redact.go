package api

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/secret"
	"github.com/clawguard/clawguard/server/internal/authn"
	"github.com/clawguard/clawguard/server/internal/rpcdecl"
)

// Secrets are write-only (SECURITY.md, "Who may read what"): every answer
// of every RPC, to every principal, passes through RedactUnary or
// RedactStream, which replace each secret value it carries (package secret:
// the fields the protos mark, wherever they are nested, and the payloads
// shaped like them) with "<redacted>". The one exception is a method whose
// rule says reveals_secrets (the runner's GetSessionConfig and Connect),
// answered in clear only to the runner itself — never to an agent it
// asserts. A new kind of credential is one more marked field: no handler
// has anything to do.

// RedactUnary redacts a unary answer.
func RedactUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	resp, err := h(ctx, req)
	if err != nil || reveals(ctx, info.FullMethod) {
		return resp, err
	}
	if m, ok := resp.(proto.Message); ok {
		return secret.Redact(m), nil
	}
	return resp, nil
}

// RedactStream redacts every message a stream sends.
func RedactStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if reveals(ss.Context(), info.FullMethod) {
		return h(srv, ss)
	}
	return h(srv, redactingStream{ss})
}

type redactingStream struct{ grpc.ServerStream }

func (s redactingStream) SendMsg(m any) error {
	if pm, ok := m.(proto.Message); ok {
		m = secret.Redact(pm)
	}
	return s.ServerStream.SendMsg(m)
}

// reveals: the method declares reveals_secrets and the caller is a runner
// speaking for itself.
func reveals(ctx context.Context, fullMethod string) bool {
	r := rpcdecl.For(fullMethod)
	if !r.GetRevealsSecrets() {
		return false
	}
	c, ok := authn.FromContext(ctx)
	return ok && c.Principal.Kind == guardv1.Principal_PRINCIPAL_RUNNER && c.Agent == nil
}
