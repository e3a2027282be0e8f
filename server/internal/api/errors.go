package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/clawguard/clawguard/server/internal/fault"
	"github.com/clawguard/clawguard/server/internal/store"
)

// Retryable is Unavailable with a RetryInfo detail: nothing was decided or
// changed, and the same request may be sent again after the delay.
func Retryable(msg string, after time.Duration) error {
	return withRetryHint(codes.Unavailable, msg, after)
}

// withRetryHint is a status carrying a RetryInfo delay.
func withRetryHint(code codes.Code, msg string, after time.Duration) error {
	st := status.New(code, msg)
	if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(after)}); err == nil {
		st = d
	}
	return st.Err()
}

// RetryDelay is the RetryInfo delay of a status (0 when it carries none).
func RetryDelay(st *status.Status) time.Duration {
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	return 0
}

// InvalidArgument names the offending field.
func InvalidArgument(field, format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, "%s: %s", field, fmt.Sprintf(format, args...))
}

// Status is the one mapping of what went wrong to the status a client is
// told; the error interceptor (app) passes every error a handler or the
// authentication returns through it. A status the edge made (validation,
// admission, auth, a stream's own Send or Recv) is answered as it was made,
// however a domain wrapped it on its way out. A fault (package fault)
// becomes its kind's code with its words, its retry hint and its details;
// a context error its code. Anything else is no fault a domain made: a
// database that cannot serve now — unreachable, restarting, shutting down,
// out of disk or connections, a read-only standby — is Unavailable with a
// retry hint wherever it was met, and the rest is Internal, its text kept
// in the log, never in the answer.
func Status(err error) error {
	if err == nil {
		return nil
	}
	if st := edgeStatus(err); st != nil {
		return st.Err()
	}
	switch {
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "canceled")
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "deadline exceeded")
	}
	f, ok := fault.As(err)
	if !ok {
		if store.IsUnavailable(err) {
			slog.Warn("the database is unavailable", "err", err)
			return Retryable("the database is unavailable; retry", fault.DefaultRetryAfter)
		}
		slog.Error("internal error", "err", err)
		return status.Error(codes.Internal, "internal error")
	}
	code := faultCodes[f.Kind]
	switch {
	case f.Kind == fault.Internal:
		slog.Error("internal error", "err", err)
	case f.Err != nil && (f.Kind == fault.Unavailable || f.Kind == fault.Aborted):
		// The caller retries; the log says what the database said.
		slog.Warn(f.Msg, "kind", f.Kind.String(), "err", f.Err)
	}
	st := status.New(code, f.Msg)
	var details []protoadapt.MessageV1
	if f.RetryAfter > 0 {
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(f.RetryAfter)})
	}
	for _, d := range f.Details {
		details = append(details, protoadapt.MessageV1Of(d))
	}
	if len(details) > 0 {
		if withDetails, err := st.WithDetails(details...); err == nil {
			st = withDetails
		}
	}
	return st.Err()
}

// edgeStatus is the status err carries, nil when it carries none (or an
// Unknown one, which no edge makes).
func edgeStatus(err error) *status.Status {
	var carrier interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &carrier) {
		return nil
	}
	if st := carrier.GRPCStatus(); st != nil && st.Code() != codes.Unknown {
		return st
	}
	return nil
}

// faultCodes is each fault kind's code.
var faultCodes = map[fault.Kind]codes.Code{
	fault.Internal:        codes.Internal,
	fault.Invalid:         codes.InvalidArgument,
	fault.NotFound:        codes.NotFound,
	fault.Exists:          codes.AlreadyExists,
	fault.Precondition:    codes.FailedPrecondition,
	fault.Denied:          codes.PermissionDenied,
	fault.Unauthenticated: codes.Unauthenticated,
	fault.Unavailable:     codes.Unavailable,
	fault.Aborted:         codes.Aborted,
	fault.Exhausted:       codes.ResourceExhausted,
	fault.OutOfRange:      codes.OutOfRange,
	fault.Unimplemented:   codes.Unimplemented,
}
