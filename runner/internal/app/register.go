package app

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/retry"
)

// ConformanceError is a refused registration: the server found delivery
// actions that would run without a guard decision.
type ConformanceError struct {
	Violations []string
	Exempt     []string
	Message    string
}

func (e *ConformanceError) Error() string {
	return "guard conformance failure: " + strings.Join(e.Violations, "; ")
}

// Banner is what the runner prints before exiting 1 on a conformance failure.
func (e *ConformanceError) Banner() string {
	line := strings.Repeat("=", 64)
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s\nclawguard-runner stopped: guard conformance failure\n%s\n", line, line)
	b.WriteString("The server refused this runner's delivery actions: a privileged action\n")
	b.WriteString("is not mapped to the guard catalog — it would run with no allow/hold/deny\n")
	b.WriteString("decision.\n\n")
	for _, v := range e.Violations {
		fmt.Fprintf(&b, "  - %s\n", v)
	}
	if len(e.Violations) == 0 {
		fmt.Fprintf(&b, "  - %s\n", e.Message)
	}
	b.WriteString("\nFix the registration (map the action to its catalog entry). Only the\n")
	b.WriteString("server's declared exemption list may run unmapped")
	if len(e.Exempt) > 0 {
		b.WriteString(": " + strings.Join(e.Exempt, ", "))
	}
	fmt.Fprintf(&b, ".\n%s\n", line)
	return b.String()
}

// Register sends the manifest derived from the action registry. A
// FailedPrecondition is a *ConformanceError, a refused token or request
// final; anything else (an unreachable or failing server, a lease still
// held by an earlier process) is retried with back-off, 200 ms doubling to
// 5 s (jittered), until ctx ends; each attempt is bounded, so a server
// that hangs is asked again. A registration renews the lease: its
// send time is the lease's (the fence counts from it).
func (r *Runner) Register(ctx context.Context) error {
	host := r.Config.Host
	caps := []string{r.Runtime.Name()}
	if r.Runtime.Name() == "docker" {
		caps = append(caps, "image-build")
	}
	req := &guardv1.RegisterRunnerRequest{
		RunnerId: r.Config.ID, Host: host, Version: Version, Capabilities: caps,
		DeliveryActions: r.Actions.Manifest(), InstanceId: r.instanceID,
	}
	var sent time.Time
	resp, err := backoff.Retry(ctx, func() (*guardv1.RegisterRunnerResponse, error) {
		sent = time.Now()
		actx, cancel := context.WithTimeout(ctx, registerTimeout)
		resp, err := r.regCli.RegisterRunner(actx, req)
		cancel()
		st := status.Convert(err)
		switch st.Code() {
		case codes.OK:
			return resp, nil
		case codes.FailedPrecondition:
			ce := &ConformanceError{Message: st.Message()}
			for _, d := range st.Details() {
				if v, ok := d.(*guardv1.ConformanceViolations); ok {
					ce.Violations = append(ce.Violations, v.GetViolations()...)
				}
			}
			return nil, backoff.Permanent(ce)
		case codes.PermissionDenied, codes.Unauthenticated, codes.InvalidArgument, codes.Unimplemented:
			// This runner's token or request is wrong: asking again changes nothing.
			return nil, backoff.Permanent(fmt.Errorf("register runner: %w", err))
		default:
			// The server or its database failing (Unavailable, Internal,
			// Unknown, a deadline), or an earlier process's lease
			// (AlreadyExists): a runner that stopped here would leave its
			// sessions' deliveries waiting, so it keeps asking.
			return nil, err
		}
	},
		backoff.WithBackOff(retry.Exponential(200*time.Millisecond, 5*time.Second)),
		backoff.WithMaxElapsedTime(0), // until ctx ends
		backoff.WithNotify(func(err error, d time.Duration) {
			if status.Code(err) == codes.AlreadyExists {
				// An earlier process of this runner still holds the lease; it
				// expires without heartbeats, then this process takes over.
				r.Log.Warn("runner id held by another live process; waiting for its lease", "err", err)
				return
			}
			r.Log.Warn(registrationRetry(err), "err", err, "backoff", d)
		}))
	if err != nil {
		return err
	}
	r.heartbeat = resp.GetHeartbeatInterval().AsDuration()
	ttl := resp.GetLeaseTtl().AsDuration()
	if ttl <= 0 {
		ttl = 3 * r.heartbeat // a server that does not say: its default relation
	}
	r.lease.Renewed(sent, ttl)
	// The server places sessions by this identity (the token's host and
	// labels, narrowed by --host): say which it is.
	r.Log.Info("registered", "host", resp.GetHost(), "labels", resp.GetLabels())
	return nil
}

// registerTimeout bounds one registration attempt.
const registerTimeout = 5 * time.Second

// registrationRetry says why a registration is tried again, as what it was.
func registrationRetry(err error) string {
	switch status.Code(err) {
	case codes.Unavailable:
		return "server (or its database) unavailable; retrying registration"
	case codes.DeadlineExceeded:
		return "no answer to the registration in time; retrying it"
	case codes.ResourceExhausted:
		return "server overloaded; retrying registration"
	case codes.Internal, codes.Unknown:
		return "server failed to register this runner; retrying registration"
	default:
		return "registration not accepted yet; retrying it"
	}
}
