// Package telemetry is the one OpenTelemetry tracing setup of every
// Clawguard binary (server, runner, ncl, the chat bridges): an OTLP/gRPC
// exporter when an endpoint is configured, nothing at all when not, W3C
// trace context on the wire, and the helpers that carry a trace context
// through what outlives a request (a hold, a replay push) as a W3C
// traceparent string.
//
// Export is off by default. Off, the provider is OpenTelemetry's no-op one
// and no gRPC stats handler is installed: the decision path pays nothing
// but a string check per DecideStream frame.
package telemetry

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"
)

// ScopeName is the instrumentation scope of Clawguard's own spans.
const ScopeName = "github.com/clawguard/clawguard"

// Propagator is the one propagator every binary uses: W3C tracecontext.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// Options configure Setup.
type Options struct {
	Service  string // service.name, e.g. "clawguard-server"
	Version  string // service.version
	Instance string // service.instance.id ("" leaves it out)
	// Endpoint is the OTLP/gRPC collector: a URL (http:// is plaintext,
	// https:// TLS) or host:port (TLS). Empty: the standard
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT
	// decide; with neither set tracing is off.
	Endpoint string
}

// Tracing is a binary's tracer provider and what it hands gRPC.
type Tracing struct {
	provider trace.TracerProvider
	sdk      *sdktrace.TracerProvider // nil when off
}

// Off is tracing that records and exports nothing.
func Off() *Tracing { return &Tracing{provider: noop.NewTracerProvider()} }

// EnvEndpoint is the collector the standard OTLP environment names ("":
// none). OTEL_SDK_DISABLED=true turns tracing off whatever is set.
func EnvEndpoint() string {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return ""
	}
	if v := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); v != "" {
		return v
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
}

// Setup builds the tracer provider o asks for: an OTLP/gRPC batch exporter
// when an endpoint is configured (o.Endpoint, else the environment), else
// Off. The exporter connects lazily: a collector that is down loses spans,
// never a request.
func Setup(ctx context.Context, o Options) (*Tracing, error) {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return Off(), nil
	}
	var opts []otlptracegrpc.Option
	switch {
	case o.Endpoint == "":
		if EnvEndpoint() == "" {
			return Off(), nil
		}
		// The exporter reads the OTEL_EXPORTER_OTLP_* variables itself.
	case strings.Contains(o.Endpoint, "://"):
		opts = append(opts, otlptracegrpc.WithEndpointURL(o.Endpoint))
	default:
		opts = append(opts, otlptracegrpc.WithEndpoint(o.Endpoint))
	}
	exp, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("otlp exporter: %w", err)
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", o.Service)}
	if o.Version != "" {
		attrs = append(attrs, attribute.String("service.version", o.Version))
	}
	if o.Instance != "" {
		attrs = append(attrs, attribute.String("service.instance.id", o.Instance))
	}
	// Ours win over OTEL_RESOURCE_ATTRIBUTES for these keys; the others
	// (deployment.environment, k8s.*) pass through.
	res, err := resource.Merge(resource.Environment(), resource.NewSchemaless(attrs...))
	if err != nil {
		return nil, fmt.Errorf("otel resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Tracing{provider: tp, sdk: tp}, nil
}

// SetupFromEnv is Setup for the binaries configured only by environment
// (ncl, the chat bridges); it also makes the result the global provider,
// so a library that traces by default follows it.
func SetupFromEnv(ctx context.Context, service, version string) (*Tracing, error) {
	t, err := Setup(ctx, Options{Service: service, Version: version})
	if err != nil {
		return nil, err
	}
	if t.Enabled() {
		otel.SetTracerProvider(t.provider)
		otel.SetTextMapPropagator(Propagator)
	}
	return t, nil
}

// Enabled: spans are recorded and exported.
func (t *Tracing) Enabled() bool { return t != nil && t.sdk != nil }

// Provider is the tracer provider (the no-op one when off).
func (t *Tracing) Provider() trace.TracerProvider {
	if t == nil {
		return noop.NewTracerProvider()
	}
	return t.provider
}

// Tracer is the tracer of Clawguard's own spans.
func (t *Tracing) Tracer() trace.Tracer { return t.Provider().Tracer(ScopeName) }

// Shutdown flushes what is buffered and stops the exporter (bounded by
// ctx); a no-op when off.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	return t.sdk.Shutdown(ctx)
}

// ShutdownWithin is Shutdown bounded by d.
func (t *Tracing) ShutdownWithin(d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return t.Shutdown(ctx)
}

// ServerOptions are the gRPC server's tracing options: otelgrpc's stats
// handler when on, none when off (no per-call cost).
func (t *Tracing) ServerOptions() []grpc.ServerOption {
	if !t.Enabled() {
		return nil
	}
	return []grpc.ServerOption{grpc.StatsHandler(otelgrpc.NewServerHandler(
		otelgrpc.WithTracerProvider(t.provider), otelgrpc.WithPropagators(Propagator)))}
}

// DialOptions are a gRPC client's tracing options: otelgrpc's stats
// handler when on, none when off.
func (t *Tracing) DialOptions() []grpc.DialOption {
	if !t.Enabled() {
		return nil
	}
	return []grpc.DialOption{grpc.WithStatsHandler(otelgrpc.NewClientHandler(
		otelgrpc.WithTracerProvider(t.provider), otelgrpc.WithPropagators(Propagator)))}
}

// Traceparent is ctx's span context as a W3C traceparent header value, ""
// when ctx carries none.
func Traceparent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	Propagator.Inject(trace.ContextWithSpanContext(context.Background(), sc), c)
	return c.Get("traceparent")
}

// SpanContext parses a traceparent ("" or malformed: an invalid context).
func SpanContext(traceparent string) trace.SpanContext {
	if traceparent == "" {
		return trace.SpanContext{}
	}
	ctx := Propagator.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent})
	return trace.SpanContextFromContext(ctx)
}

// WithRemoteParent is ctx continuing the trace traceparent names (ctx
// unchanged when it names none): the next span started is its child.
func WithRemoteParent(ctx context.Context, traceparent string) context.Context {
	sc := SpanContext(traceparent)
	if !sc.IsValid() {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// Links are span links to each valid traceparent (none for "" ones).
func Links(traceparents ...string) []trace.Link {
	var out []trace.Link
	for _, tp := range traceparents {
		if sc := SpanContext(tp); sc.IsValid() {
			out = append(out, trace.Link{SpanContext: sc})
		}
	}
	return out
}
