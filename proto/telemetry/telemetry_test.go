package telemetry

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

func TestTraceparentRoundTrip(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := WithRemoteParent(context.Background(), tp)
	if got := Traceparent(ctx); got != tp {
		t.Fatalf("Traceparent = %q, want %q", got, tp)
	}
	if l := Links(tp, "", "garbage"); len(l) != 1 || l[0].SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("Links = %v", l)
	}
	if Traceparent(context.Background()) != "" || trace.SpanContextFromContext(WithRemoteParent(context.Background(), "00-zz")).IsValid() {
		t.Fatal("an absent or malformed traceparent must give no context")
	}
}

func TestOffByDefault(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	tr, err := Setup(context.Background(), Options{Service: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Enabled() || tr.ServerOptions() != nil || tr.DialOptions() != nil {
		t.Fatal("tracing on with no endpoint")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	on, err := Setup(context.Background(), Options{Service: "x"})
	if err != nil {
		t.Fatal(err)
	}
	defer on.Shutdown(context.Background())
	if !on.Enabled() || len(on.ServerOptions()) != 1 {
		t.Fatal("the standard OTLP endpoint variable did not turn tracing on")
	}
	t.Setenv("OTEL_SDK_DISABLED", "true")
	if off, _ := Setup(context.Background(), Options{Service: "x", Endpoint: "http://127.0.0.1:1"}); off.Enabled() {
		t.Fatal("OTEL_SDK_DISABLED=true did not turn tracing off")
	}
}
