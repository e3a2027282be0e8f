package api

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/clawguard/clawguard/server/internal/guard"
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

// DBRetryAfter is the delay DBError suggests when the database cannot
// serve: long enough for a restart's first connections, short enough that a
// click lands within a second of the database coming back.
const DBRetryAfter = time.Second

// DBError maps a database error to the status that means the same thing;
// what is passed as what names the object ("group", "role grant"). It is
// the one mapping from store.Classify's classes to codes: handlers call it,
// and the error interceptor (app) passes every other error that is not yet
// a status through it. The client gets our words, never the database's text
// (logged here instead): bad data is InvalidArgument, a constraint
// FailedPrecondition or AlreadyExists, a conflict Aborted, and a database
// that cannot serve now — unreachable, restarting, shutting down, out of
// disk or connections, a read-only standby — Unavailable with a RetryInfo
// hint: the same request may be sent again. Only what retrying cannot
// change is Internal.
func DBError(what string, err error) error {
	if err == nil {
		return nil
	}
	if status.Code(err) != codes.Unknown {
		return err
	}
	if errors.Is(err, guard.ErrUnavailable) {
		// The guard could not decide (its database): nothing was decided.
		slog.Warn("the guard could not decide", "what", what, "err", err)
		return Retryable(what+": the guard could not decide now; nothing was done: retry", guard.RetryAfter)
	}
	class := store.Classify(err)
	switch class {
	case store.ClassNotFound:
		return status.Errorf(codes.NotFound, "%s not found", what)
	case store.ClassUnique:
		return status.Errorf(codes.AlreadyExists, "%s already exists", what)
	case store.ClassForeignKey:
		return status.Errorf(codes.NotFound, "%s refers to something that does not exist (%s)", what, store.ConstraintName(err))
	case store.ClassCheck:
		return status.Errorf(codes.InvalidArgument, "%s: value refused by the schema (%s)", what, store.ConstraintName(err))
	case store.ClassCanceled:
		return status.Error(codes.Canceled, "canceled")
	case store.ClassDeadline:
		return status.Error(codes.DeadlineExceeded, "deadline exceeded")
	}
	slog.Warn("database error", "what", what, "class", class.String(), "err", err)
	switch class {
	case store.ClassData:
		return status.Errorf(codes.InvalidArgument, "%s: a value is malformed or too long to store", what)
	case store.ClassIntegrity:
		return status.Errorf(codes.FailedPrecondition, "%s: refused by a constraint (%s)", what, store.ConstraintName(err))
	case store.ClassConflict:
		return status.Errorf(codes.Aborted, "%s: conflicted with a concurrent change; try again", what)
	case store.ClassUnavailable:
		return Retryable(what+": the database is unavailable; retry", DBRetryAfter)
	case store.ClassRefused:
		// Postgres answered and refused: retrying changes nothing.
		return status.Errorf(codes.Internal, "%s: the database refused the operation", what)
	}
	return status.Errorf(codes.Internal, "%s: internal error", what)
}
