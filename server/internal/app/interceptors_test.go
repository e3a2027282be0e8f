package app

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A hot call skips the logging middleware while debug is off, but a failure
// worth a line is still logged with the call's fields and request id; an OK
// call is logged at debug exactly as before.
func TestQuietHotCallsLogsWhatTheLevelsSay(t *testing.T) {
	hot := &grpc.UnaryServerInfo{FullMethod: "/guard.v1.Guard/Decide"}
	cases := []struct {
		name   string
		level  slog.Level
		err    error
		want   string // level of the one line, "" for none
		direct bool   // the middleware must not have run
	}{
		{"ok at info", slog.LevelInfo, nil, "", true},
		{"denied-ish at info", slog.LevelInfo, status.Error(codes.PermissionDenied, "no"), "", true},
		{"unavailable at info", slog.LevelInfo, status.Error(codes.Unavailable, "db down"), "WARN", true},
		{"internal at error", slog.LevelError, status.Error(codes.Internal, "boom"), "ERROR", true},
		{"ok at debug", slog.LevelDebug, nil, "DEBUG", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: tc.level}))
			middlewareRan := false
			full := logging.UnaryServerInterceptor(interceptorLogger(log), logging.WithLogOnEvents(logging.FinishCall), logging.WithLevels(callLevel))
			spy := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				middlewareRan = true
				return full(ctx, req, info, h)
			}
			ctx := logging.InjectFields(context.Background(), logging.Fields{"request_id", "rid-1"})
			_, err := quietHotCalls(log, spy)(ctx, nil, hot, func(context.Context, any) (any, error) { return "resp", tc.err })
			if status.Code(err) != status.Code(tc.err) {
				t.Fatalf("error changed: %v", err)
			}
			if middlewareRan == tc.direct {
				t.Fatalf("middleware ran = %v, want %v", middlewareRan, !tc.direct)
			}
			if tc.want == "" {
				if buf.Len() != 0 {
					t.Fatalf("logged %q, want nothing", buf.String())
				}
				return
			}
			var line map[string]any
			if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
				t.Fatalf("want one JSON line, got %q: %v", buf.String(), err)
			}
			for k, v := range map[string]any{"level": tc.want, "msg": "finished call", "request_id": "rid-1",
				"grpc.service": "guard.v1.Guard", "grpc.method": "Decide", "grpc.code": status.Code(tc.err).String()} {
				if line[k] != v {
					t.Errorf("%s = %v, want %v (line %v)", k, line[k], v, line)
				}
			}
			if line["grpc.time_ms"] == nil {
				t.Errorf("no grpc.time_ms in %v", line)
			}
		})
	}
}

// Other methods always go through the middleware.
func TestQuietHotCallsLeavesOtherMethodsToTheMiddleware(t *testing.T) {
	log := slog.New(slog.NewJSONHandler(&bytes.Buffer{}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ran := false
	spy := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		ran = true
		return h(ctx, req)
	}
	info := &grpc.UnaryServerInfo{FullMethod: "/guard.v1.Registry/ListRunners"}
	if _, err := quietHotCalls(log, spy)(context.Background(), nil, info, func(context.Context, any) (any, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if !ran {
		t.Fatal("middleware skipped for a method that is not hot")
	}
}
