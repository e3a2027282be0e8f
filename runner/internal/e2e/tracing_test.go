package e2e

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/grpc"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// otlpReceiver is an in-process OTLP/gRPC trace collector: it keeps every
// span it is sent, with the service that sent it.
type otlpReceiver struct {
	collectortrace.UnimplementedTraceServiceServer
	addr string

	mu    sync.Mutex
	spans []span
}

// span is one received span, flattened for assertions.
type span struct {
	service, instance, scope, name string
	trace, id, parent              string
	links                          []string // the trace ids it links to
	attrs                          map[string]string
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &otlpReceiver{addr: ln.Addr().String()}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, r)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return r
}

func (r *otlpReceiver) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		res := attrMap(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				out := span{service: res["service.name"], instance: res["service.instance.id"], scope: ss.GetScope().GetName(),
					name: sp.GetName(), trace: hex.EncodeToString(sp.GetTraceId()), id: hex.EncodeToString(sp.GetSpanId()),
					parent: hex.EncodeToString(sp.GetParentSpanId()), attrs: attrMap(sp.GetAttributes())}
				for _, l := range sp.GetLinks() {
					out.links = append(out.links, hex.EncodeToString(l.GetTraceId()))
				}
				r.spans = append(r.spans, out)
			}
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func attrMap(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		m[kv.GetKey()] = kv.GetValue().GetStringValue()
	}
	return m
}

// find is the first span received that matches, and whether there is one.
func (r *otlpReceiver) find(match func(span) bool) (span, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.spans {
		if match(s) {
			return s, true
		}
	}
	return span{}, false
}

// await waits (bounded) until a span that matches has arrived.
func (r *otlpReceiver) await(t *testing.T, what string, match func(span) bool) span {
	t.Helper()
	var got span
	waitFor(t, 20*time.Second, what, func() bool {
		var ok bool
		got, ok = r.find(match)
		return ok
	})
	return got
}

func (r *otlpReceiver) dump() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, s := range r.spans {
		fmt.Fprintf(&b, "%s %s %q trace=%s parent=%s links=%v attrs=%v\n", s.service, s.instance, s.name, s.trace, s.parent, s.links, s.attrs)
	}
	return b.String()
}

// TestOneApprovalIsOneTrace: an agent's send is held, approved through
// another replica, replayed and applied; the runner's and both replicas'
// spans form one trace (the request's), linked with the approval's.
func TestOneApprovalIsOneTrace(t *testing.T) {
	recv := startOTLPReceiver(t)
	// Both servers (child processes) and the in-process runner read the
	// standard variables; spans leave in batches every 50 ms.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+recv.addr)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	a := startServer(t)
	// The approvers' replica is told by its flag.
	b := startServerOn(t, a.db, nil, a.opToken, "--otlp-endpoint", "http://"+recv.addr)
	alpha, _, dana, r := a2aSetup(t, a, "process")
	sa := r.session(t, alpha)
	held := waitEvent(t, sa, "HELD notice", notice("HELD"))
	holdID := held.s("hold_id")
	defer func() {
		if t.Failed() {
			t.Logf("spans received:\n%s", recv.dump())
		}
	}()

	// The send: the runner's span, and the guard's decision under it.
	submit := recv.await(t, "the runner's Submit span", func(s span) bool {
		return s.service == "clawguard-runner" && s.name == "clawguard.runner/Submit" && s.attrs["clawguard.hold_id"] == holdID
	})
	if submit.attrs["clawguard.delivery_action"] != "send_message" || submit.attrs["clawguard.outcome"] != "SEND_STATUS_HELD" {
		t.Fatalf("submit span attributes %v", submit.attrs)
	}
	decided := recv.await(t, "the guard's HOLD decision", func(s span) bool {
		return s.service == "clawguard-server" && s.name == "clawguard.guard/Decide" && s.attrs["clawguard.hold_id"] == holdID &&
			s.attrs["clawguard.grant"] == ""
	})
	if decided.trace != submit.trace || decided.attrs["clawguard.effect"] != "hold" || decided.attrs["clawguard.action"] != "a2a.send" {
		t.Fatalf("the HOLD decision is not in the send's trace: %+v (send's trace %s)", decided, submit.trace)
	}
	if decided.instance != "" && !strings.HasSuffix(decided.instance, a.addr) {
		t.Fatalf("the decision came from %q, not replica %s", decided.instance, a.addr)
	}
	// The statements the decision ran are its children (otelpgx).
	recv.await(t, "a database span in the send's trace", func(s span) bool {
		return s.service == "clawguard-server" && s.scope == "github.com/exaring/otelpgx" && s.trace == submit.trace
	})

	// Approved on the other replica: its Resolve links to the held trace.
	b.approve(t, holdID, dana)
	resolve := recv.await(t, "replica B's Resolve span", func(s span) bool {
		return s.service == "clawguard-server" && s.name == "guard.v1.Approvals/Resolve" && strings.HasSuffix(s.instance, b.addr)
	})
	if !contains(resolve.links, submit.trace) {
		t.Fatalf("Resolve does not link to the held request's trace %s: %+v", submit.trace, resolve)
	}

	// The replay continues the held trace, linked to the approval's.
	replay := recv.await(t, "the runner's Replay span", func(s span) bool {
		return s.service == "clawguard-runner" && s.name == "clawguard.runner/Replay" && s.attrs["clawguard.hold_id"] == holdID
	})
	if replay.trace != submit.trace || replay.parent != decided.id || !contains(replay.links, resolve.trace) {
		t.Fatalf("replay span %+v: want trace %s, parent %s (the HOLD decision), a link to %s (the approval)",
			replay, submit.trace, decided.id, resolve.trace)
	}
	if replay.attrs["clawguard.outcome"] != "SEND_STATUS_DONE" {
		t.Fatalf("replay outcome %v", replay.attrs)
	}
	granted := recv.await(t, "the replay's ALLOW decision", func(s span) bool {
		return s.name == "clawguard.guard/Decide" && s.attrs["clawguard.grant"] == holdID
	})
	if granted.trace != submit.trace || granted.attrs["clawguard.effect"] != "allow" || granted.attrs["clawguard.decision_id"] == "" {
		t.Fatalf("the replay's decision %+v is not an ALLOW in trace %s", granted, submit.trace)
	}
	// ApplyAction, on both sides of the wire, in the same trace.
	for _, side := range []string{"clawguard-runner", "clawguard-server"} {
		apply := recv.await(t, side+"'s ApplyAction span", func(s span) bool {
			return s.service == side && s.name == "guard.v1.Registry/ApplyAction" && s.trace == submit.trace
		})
		if apply.parent == "" {
			t.Fatalf("%s's ApplyAction span has no parent: %+v", side, apply)
		}
	}
	waitEvent(t, sa, "RESULT notice", notice("RESULT"))
	// Nothing else changed hands: the hold was approved and used once.
	h, err := a.op.approvals.Get(context.Background(), &guardv1.GetRequest{Id: holdID})
	if err != nil {
		t.Fatal(err)
	}
	if !h.GetHold().GetConsumed() {
		t.Fatalf("hold %s not consumed after its replay", holdID)
	}
}
