package ncl

import (
	"errors"
	"fmt"
	"strings"
	"unicode"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// serverError is a gRPC status from a call.
type serverError struct {
	st     *status.Status
	server string
}

func (e *serverError) Error() string { return e.st.Message() }

func asServerError(err error, server string) error {
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok {
		return &serverError{st: st, server: server}
	}
	return err
}

// describe turns an error into the one line ncl prints and the exit code.
func describe(err error) (string, int) {
	var se *serverError
	var ce connError
	switch {
	case errors.As(err, &se):
		return describeStatus(se)
	case errors.As(err, &ce):
		return ce.Error(), ExitUsage
	}
	return err.Error(), ExitUsage
}

func describeStatus(se *serverError) (string, int) {
	st := se.st
	for _, d := range st.Details() {
		if p, ok := d.(*guardv1.ApprovalPending); ok && st.Code() == codes.FailedPrecondition {
			return fmt.Sprintf("approval pending: hold %s — approve with: ncl approvals approve %s", p.GetHoldId(), p.GetHoldId()), ExitServer
		}
	}
	switch st.Code() {
	case codes.Unavailable:
		return fmt.Sprintf("cannot reach server %s: %s", se.server, st.Message()), ExitUsage
	case codes.Canceled:
		return "canceled", ExitServer
	}
	return codeWords(st.Code()) + ": " + st.Message(), ExitServer
}

// codeWords: NotFound → "not found", PermissionDenied → "permission denied".
func codeWords(c codes.Code) string {
	var b strings.Builder
	for i, r := range c.String() {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte(' ')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
