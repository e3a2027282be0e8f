// Package fault is what went wrong, as the domains say it: one error type
// with a kind, words the caller may read, and what the caller needs to act
// (a retry hint, a detail such as the hold an approval is pending on). The
// domains return faults and never gRPC statuses; the API edge turns a fault
// into its status in one place (api.Status). Database errors become faults
// where the SQL runs (store.Fault). An error that is no fault is the
// server's own failure: answered Internal, its text kept in the log.
package fault

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
)

// Kind says what the caller can do about a fault.
type Kind int

// The kinds, one per gRPC code the API answers with.
const (
	// Internal: the server's own failure (never the zero value of a fault a
	// domain made on purpose: New refuses it).
	Internal Kind = iota
	// Invalid: the request is malformed; the same request fails again.
	Invalid
	// NotFound: what the request names does not exist (or the caller may
	// not know that it does).
	NotFound
	// Exists: what the request would create exists already.
	Exists
	// Precondition: the system is not in the state the request needs
	// (an approval pending, a runner refused at registration).
	Precondition
	// Denied: the caller may not do this.
	Denied
	// Unauthenticated: the caller is unknown.
	Unauthenticated
	// Unavailable: nothing was done and the same request may succeed later
	// (the database down, restarting or full; a replay the guard could not
	// decide). Carries a retry hint.
	Unavailable
	// Aborted: a concurrent change won; the same request may succeed now.
	Aborted
	// Exhausted: a limit was reached (admission, an inbox); retry after
	// the hint.
	Exhausted
	// OutOfRange: a cursor or page past what is kept.
	OutOfRange
	// Unimplemented: the server does not do this.
	Unimplemented
)

var kindNames = [...]string{"internal", "invalid", "not_found", "exists", "precondition", "denied",
	"unauthenticated", "unavailable", "aborted", "exhausted", "out_of_range", "unimplemented"}

func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// DefaultRetryAfter is the hint an Unavailable fault carries unless its
// maker knows better.
const DefaultRetryAfter = time.Second

// Error is a fault.
type Error struct {
	Kind Kind
	// Msg is what the caller is told: the server's words, never a
	// database's or a library's.
	Msg string
	// RetryAfter is the hint of an Unavailable or Exhausted fault.
	RetryAfter time.Duration
	// Details go with the answer (an ApprovalPending, say).
	Details []proto.Message
	// Err is the cause, for the log; the caller never sees its text.
	Err error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// New is a fault of kind with a formatted message.
func New(kind Kind, format string, args ...any) error {
	f := &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
	if kind == Unavailable || kind == Exhausted {
		f.RetryAfter = DefaultRetryAfter
	}
	return f
}

// Wrap is a fault of kind caused by err (kept for the log only).
func Wrap(kind Kind, err error, format string, args ...any) error {
	f := New(kind, format, args...).(*Error)
	f.Err = err
	return f
}

// InvalidField is an Invalid fault naming the field: "<field>: <what>".
func InvalidField(field, format string, args ...any) error {
	return New(Invalid, "%s: %s", field, fmt.Sprintf(format, args...))
}

// NotFoundf, Existsf, Preconditionf and Deniedf are the common kinds.
func NotFoundf(format string, args ...any) error     { return New(NotFound, format, args...) }
func Existsf(format string, args ...any) error       { return New(Exists, format, args...) }
func Preconditionf(format string, args ...any) error { return New(Precondition, format, args...) }
func Deniedf(format string, args ...any) error       { return New(Denied, format, args...) }

// Unavailablef is an Unavailable fault: nothing was done; retry after.
func Unavailablef(after time.Duration, cause error, format string, args ...any) error {
	f := Wrap(Unavailable, cause, format, args...).(*Error)
	if after > 0 {
		f.RetryAfter = after
	}
	return f
}

// WithDetails returns err's fault carrying details too (err itself when it
// is no fault).
func WithDetails(err error, details ...proto.Message) error {
	var f *Error
	if !errors.As(err, &f) {
		return err
	}
	out := *f
	out.Details = append(append([]proto.Message(nil), f.Details...), details...)
	return &out
}

// As is err's fault, ok false when err carries none.
func As(err error) (*Error, bool) {
	var f *Error
	ok := errors.As(err, &f)
	return f, ok
}

// KindOf is err's fault kind (Internal when it carries none).
func KindOf(err error) Kind {
	if f, ok := As(err); ok {
		return f.Kind
	}
	return Internal
}

// Is reports whether err carries a fault of kind.
func Is(err error, kind Kind) bool {
	f, ok := As(err)
	return ok && f.Kind == kind
}

// Message is the words a caller may read of err: a fault's message (the
// server's own words, whatever its kind), or "internal error" for anything
// else.
func Message(err error) string {
	if f, ok := As(err); ok {
		return f.Msg
	}
	return "internal error"
}
