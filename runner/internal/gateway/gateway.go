// Package gateway is the agent gateway: a gRPC service (agent.v1.AgentGateway)
// on a unix socket per session, mounted into the session's container.
//
// Everything a container says is untrusted. Send validates at the edge
// (request id, known action, payload size), rate-limits per session and
// bounds the actions in flight, so a flooding or garbage-sending container
// gets FAILED answers and notices, never a stalled or crashed runner.
// Actions run on a context detached from the agent's call: an agent that
// hangs up mid-decision still gets the outcome as a notice in its inbox.
package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/net/netutil"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
	"github.com/clawguard/clawguard/runner/internal/delivery"
)

// MaxPayload is the largest delivery-action payload accepted (encoded).
const MaxPayload = 256 << 10

// Submitter runs a validated action (delivery.Engine in production).
type Submitter interface {
	Submit(ctx context.Context, s delivery.Session, requestID, action string, payload *structpb.Struct) delivery.Outcome
}

// Limits bound what one session's agent may send: a flooding or runaway
// agent meets them, a tool-heavy one does not (a model calls a few tools a
// second; a script in a loop, at DefaultLimits, 200 a second).
type Limits struct {
	// Rate and Burst: actions a second, and how many may come at once
	// (a token bucket: --gateway-rate, --gateway-burst).
	Rate  float64
	Burst int
	// InFlight: actions decided or running at once (--gateway-in-flight).
	InFlight int
}

// DefaultLimits are the runner's defaults (its flags', documented in
// runner/README.md).
var DefaultLimits = Limits{Rate: 200, Burst: 400, InFlight: 64}

// Names of the limits, as refusals and the refusals metric give them.
const (
	LimitRate     = "rate"
	LimitInFlight = "in_flight"
)

// Options tune one session's gateway.
type Options struct {
	Known func(action string) bool // required: is the action registered
	// Actions describes the delivery actions for ListActions (nil: none).
	Actions    func() []*agentv1.ActionSpec
	Limits     Limits        // zero fields: DefaultLimits'
	MaxConns   int           // concurrent connections (default 16)
	ActionTime time.Duration // upper bound for one action (default 2m)
	OnActivity func()        // called on every send and inbox delivery
	// OnRefused is told of each send refused at a limit (LimitRate,
	// LimitInFlight): the refusals metric.
	OnRefused func(limit string)
	// Tools lists the session's guarded MCP tools (ListTools); nil: none.
	Tools func(ctx context.Context, s delivery.Session) ([]*agentv1.McpTool, error)
	Log   *slog.Logger
	// ServerOptions are added to the gateway's gRPC server (tracing's
	// stats handler when it is on).
	ServerOptions []grpc.ServerOption
}

// Gateway serves one session.
type Gateway struct {
	agentv1.UnimplementedAgentGatewayServer
	sess     delivery.Session
	sub      Submitter
	opts     Options
	inbox    *Inbox
	limiter  *rate.Limiter
	inflight chan struct{}
	log      *slog.Logger
	srv      *grpc.Server
	ln       net.Listener
	path     string

	mu          sync.Mutex
	cache       map[string]*sent // request id → outcome (or in flight)
	order       []string
	lastLimited time.Time
}

type sent struct {
	fp   string
	done chan struct{}
	resp *agentv1.SendResponse
}

const cacheSize = 1024

// Listen serves the session's gateway on a fresh unix socket at path
// (a stale file is replaced), connectable by any local user so a container's
// non-root agent can reach it. The inbox is the session's and outlives the
// gateway.
func Listen(path string, s delivery.Session, sub Submitter, inbox *Inbox, o Options) (*Gateway, error) {
	if o.Known == nil {
		return nil, errors.New("gateway: Options.Known is required")
	}
	if o.Limits.Rate <= 0 {
		o.Limits.Rate = DefaultLimits.Rate
	}
	if o.Limits.Burst <= 0 {
		o.Limits.Burst = DefaultLimits.Burst
	}
	if o.Limits.InFlight <= 0 {
		o.Limits.InFlight = DefaultLimits.InFlight
	}
	if o.MaxConns <= 0 {
		o.MaxConns = 16
	}
	if o.ActionTime <= 0 {
		o.ActionTime = 2 * time.Minute
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if len(path) > 100 {
		return nil, fmt.Errorf("gateway socket path %q is too long for a unix socket (max ~100 bytes); use a shorter --data-dir", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("gateway socket dir: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale gateway socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("gateway listen %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return nil, fmt.Errorf("gateway socket mode: %w", err)
	}
	g := &Gateway{
		sess: s, sub: sub, opts: o, inbox: inbox,
		limiter:  rate.NewLimiter(rate.Limit(o.Limits.Rate), o.Limits.Burst),
		inflight: make(chan struct{}, o.Limits.InFlight),
		log:      o.Log.With("component", "gateway", "session", s.ID),
		ln:       netutil.LimitListener(ln, o.MaxConns),
		path:     path,
		cache:    map[string]*sent{},
	}
	g.srv = grpc.NewServer(append([]grpc.ServerOption{
		grpc.MaxRecvMsgSize(1 << 20),
		grpc.MaxConcurrentStreams(32),
		grpc.ConnectionTimeout(5 * time.Second),
	}, o.ServerOptions...)...)
	agentv1.RegisterAgentGatewayServer(g.srv, g)
	go func() {
		if err := g.srv.Serve(g.ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			g.log.Warn("gateway stopped serving", "err", err)
		}
	}()
	return g, nil
}

// Path is the socket's host path.
func (g *Gateway) Path() string { return g.path }

// Close stops serving and removes the socket (call only once the session's
// container is gone: a container keeps the socket file it was started with).
func (g *Gateway) Close() {
	g.srv.Stop()
	_ = os.Remove(g.path)
}

// Send validates and runs one delivery action.
func (g *Gateway) Send(ctx context.Context, req *agentv1.SendRequest) (*agentv1.SendResponse, error) {
	g.activity()
	if wait, ok := g.allow(); !ok {
		return g.refuseRate(req.GetRequestId(), wait), nil
	}
	if msg := g.validate(req); msg != "" {
		g.inbox.Notice(&agentv1.Notice{Kind: agentv1.NoticeKind_NOTICE_KIND_FAILED, Text: msg, RequestId: clip(req.GetRequestId(), 128), At: timestamppb.Now()})
		return &agentv1.SendResponse{Status: agentv1.SendStatus_SEND_STATUS_FAILED, Reason: msg}, nil
	}

	fp := fingerprint(req)
	g.mu.Lock()
	if prev, ok := g.cache[req.GetRequestId()]; ok {
		g.mu.Unlock()
		if prev.fp != fp {
			msg := fmt.Sprintf("request_id %q was already used for a different action", req.GetRequestId())
			return &agentv1.SendResponse{Status: agentv1.SendStatus_SEND_STATUS_FAILED, Reason: msg}, nil
		}
		select { // a retry: the first send's answer, nothing runs twice
		case <-prev.done:
			return prev.resp, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	select {
	case g.inflight <- struct{}{}:
	default:
		g.mu.Unlock()
		return g.refuseInFlight(), nil
	}
	entry := &sent{fp: fp, done: make(chan struct{})}
	g.remember(req.GetRequestId(), entry)
	g.mu.Unlock()

	go func() {
		defer func() { <-g.inflight }()
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.opts.ActionTime)
		defer cancel()
		out := g.sub.Submit(actx, g.sess, req.GetRequestId(), req.GetAction(), req.GetPayload())
		entry.resp = &agentv1.SendResponse{Status: out.Status, Reason: out.Reason, HoldId: out.HoldID, Approvers: out.Approvers}
		if req.GetResultAsJson() && out.Result == nil {
			entry.resp.ResultJson = out.ResultJSON
		} else {
			entry.resp.Result = out.ResultStruct()
		}
		close(entry.done)
	}()
	select {
	case <-entry.done:
		return entry.resp, nil
	case <-ctx.Done():
		return nil, ctx.Err() // the outcome still reaches the inbox as a notice
	}
}

func (g *Gateway) validate(req *agentv1.SendRequest) string {
	switch {
	case req.GetRequestId() == "":
		return "request_id is required"
	case len(req.GetRequestId()) > 128:
		return "request_id longer than 128 bytes"
	case req.GetAction() == "":
		return "action is required"
	case len(req.GetAction()) > 64 || !g.opts.Known(req.GetAction()):
		return fmt.Sprintf("unknown action %q", clip(req.GetAction(), 64))
	case proto.Size(req.GetPayload()) > MaxPayload:
		return fmt.Sprintf("%s failed: payload larger than %d KiB", req.GetAction(), MaxPayload>>10)
	}
	return ""
}

func (g *Gateway) remember(id string, e *sent) {
	g.cache[id] = e
	g.order = append(g.order, id)
	for len(g.order) > cacheSize {
		old := g.order[0]
		g.order = g.order[1:]
		if c := g.cache[old]; c != nil {
			select {
			case <-c.done:
				delete(g.cache, old)
			default:
				g.order = append(g.order, old) // still running: keep it
				return
			}
		}
	}
}

// ListActions describes the delivery actions the session may send, each
// with the JSON Schema its payload is validated with.
func (g *Gateway) ListActions(context.Context, *agentv1.ListActionsRequest) (*agentv1.ListActionsResponse, error) {
	g.activity()
	var specs []*agentv1.ActionSpec
	if g.opts.Actions != nil {
		specs = g.opts.Actions()
	}
	return &agentv1.ListActionsResponse{Actions: specs}, nil
}

// ListTools lists the tools of the guarded MCP servers the session may
// call (the operator's denied ones left out). It counts against the send
// rate: it may start the group's servers.
func (g *Gateway) ListTools(ctx context.Context, _ *agentv1.ListToolsRequest) (*agentv1.ListToolsResponse, error) {
	g.activity()
	if wait, ok := g.allow(); !ok {
		g.refused(LimitRate)
		return nil, status.Error(codes.ResourceExhausted, g.rateWords(wait))
	}
	if g.opts.Tools == nil {
		return &agentv1.ListToolsResponse{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, g.opts.ActionTime)
	defer cancel()
	tools, err := g.opts.Tools(ctx, g.sess)
	if err != nil {
		g.log.Warn("list guarded MCP tools", "err", err)
		return nil, status.Errorf(codes.Unavailable, "guarded MCP tools could not be listed: %v", err)
	}
	return &agentv1.ListToolsResponse{Tools: tools}, nil
}

// Inbox streams the session's messages and notices; a newer Inbox call
// replaces an older one. For an agent that acknowledges, what an earlier
// stream sent and it never acknowledged comes first.
func (g *Gateway) Inbox(req *agentv1.InboxRequest, stream grpc.ServerStreamingServer[agentv1.InboxResponse]) error {
	acks := req.GetAcknowledges()
	ctx, gen, detach := g.inbox.attach(stream.Context())
	defer detach()
	for {
		e, err := g.inbox.next(ctx, gen)
		if err != nil {
			return nil
		}
		err = stream.Send(e.item)
		// Written: taken, or (acks) held until the agent acknowledges it.
		g.inbox.wrote(e, gen, err, acks)
		if err != nil {
			return err
		}
		g.activity()
	}
}

// maxAckIDs bounds one Ack call.
const maxAckIDs = 1024

// Ack takes the items the agent says it has handled.
func (g *Gateway) Ack(_ context.Context, req *agentv1.AckRequest) (*agentv1.AckResponse, error) {
	ids := req.GetItemIds()
	if len(ids) > maxAckIDs {
		return nil, status.Errorf(codes.InvalidArgument, "ack: %d item ids, at most %d per call", len(ids), maxAckIDs)
	}
	g.activity()
	return &agentv1.AckResponse{Acknowledged: int32(g.inbox.Ack(ids))}, nil
}

func (g *Gateway) activity() {
	if g.opts.OnActivity != nil {
		g.opts.OnActivity()
	}
}

func fingerprint(req *agentv1.SendRequest) string {
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(req.GetPayload())
	h := sha256.New()
	h.Write([]byte(req.GetAction()))
	h.Write([]byte{0})
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
