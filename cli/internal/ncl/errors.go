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

// exitError is a command's own outcome with its exit code (apply's
// changes held for approval).
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

// describe turns an error into the one line ncl prints and the exit code.
func describe(err error) (string, int) {
	var se *serverError
	var ce connError
	var ee exitError
	switch {
	case errors.As(err, &ee):
		return ee.msg, ee.code
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
		// Exit 2 either way: nothing was done, retrying later may work.
		if transportFailure(st.Message()) {
			return fmt.Sprintf("cannot reach server %s: %s", se.server, st.Message()), ExitUsage
		}
		return "unavailable: " + st.Message(), ExitUsage
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

// transportFailure tells a dial or connection failure (the server never
// answered) from an Unavailable the server itself returned.
func transportFailure(msg string) bool {
	for _, s := range []string{"connection error", "transport:", "dial", "name resolver", "connection refused", "connection reset", "EOF"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
