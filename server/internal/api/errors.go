package api

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/clawguard/clawguard/server/internal/store"
)

// InvalidArgument names the offending field.
func InvalidArgument(field, format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, "%s: %s", field, fmt.Sprintf(format, args...))
}

// DBError maps a database error to the status that means the same thing;
// what is passed as what names the object ("group", "role grant").
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
	return status.Errorf(codes.Unavailable, "%s: database error: %v", what, err)
}
