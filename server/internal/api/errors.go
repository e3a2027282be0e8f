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
	"google.golang.org/protobuf/types/known/durationpb"

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

// DBError maps a database error to the status that means the same thing;
// what is passed as what names the object ("group", "role grant"). The
// client gets our words, never the database's text (logged here instead):
// bad data is InvalidArgument, a constraint FailedPrecondition or
// AlreadyExists, and only a database that could not answer is Unavailable —
// the one code clients retry.
func DBError(what string, err error) error {
	switch {
	case err == nil:
		return nil
	case status.Code(err) != codes.Unknown:
		return err
	case store.IsNoRows(err):
		return status.Errorf(codes.NotFound, "%s not found", what)
	case store.IsUniqueViolation(err):
		return status.Errorf(codes.AlreadyExists, "%s already exists", what)
	case store.IsForeignKeyViolation(err):
		return status.Errorf(codes.NotFound, "%s refers to something that does not exist (%s)", what, store.ConstraintName(err))
	case store.IsCheckViolation(err):
		return status.Errorf(codes.InvalidArgument, "%s: value refused by the schema (%s)", what, store.ConstraintName(err))
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "canceled")
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "deadline exceeded")
	}
	slog.Warn("database error", "what", what, "err", err)
	switch {
	case store.IsDataException(err):
		return status.Errorf(codes.InvalidArgument, "%s: a value is malformed or too long to store", what)
	case store.IsIntegrityViolation(err):
		return status.Errorf(codes.FailedPrecondition, "%s: refused by a constraint (%s)", what, store.ConstraintName(err))
	case store.IsRetryableConflict(err):
		return status.Errorf(codes.Aborted, "%s: conflicted with a concurrent change; try again", what)
	case store.IsDatabaseError(err):
		// Postgres answered and refused: not a reason to retry the request.
		return status.Errorf(codes.Internal, "%s: the database refused the operation", what)
	}
	return status.Errorf(codes.Unavailable, "%s: database unavailable", what)
}
