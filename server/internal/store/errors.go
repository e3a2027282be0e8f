package store

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"
)

// Class is what a database error means for the request that met it. The
// API maps each class to one gRPC code (store.Fault, then api.Status); nothing else looks
// at SQLSTATEs.
type Class int

const (
	// ClassNone: no error.
	ClassNone Class = iota
	// ClassNotFound: a single-row read found no row.
	ClassNotFound
	// ClassUnique: a duplicate key.
	ClassUnique
	// ClassForeignKey: a reference to a missing row.
	ClassForeignKey
	// ClassCheck: a value a check or not-null constraint refuses.
	ClassCheck
	// ClassData: a value Postgres cannot hold or parse (SQLSTATE class 22).
	ClassData
	// ClassIntegrity: any other integrity violation (class 23, 40002).
	ClassIntegrity
	// ClassConflict: a serialization failure, deadlock or lock timeout: the
	// same transaction may succeed when run again.
	ClassConflict
	// ClassUnavailable: the database could not be reached or cannot serve
	// now — down, restarting, shutting down, out of disk, memory or
	// connections, a read-only standby (a primary demoted in a failover),
	// the connection lost mid-statement. Nothing is wrong with the request:
	// the same request may be sent again later.
	ClassUnavailable
	// ClassCanceled: the caller's context was cancelled.
	ClassCanceled
	// ClassDeadline: the caller's deadline passed.
	ClassDeadline
	// ClassRefused: Postgres answered and refused for a reason retrying
	// does not change (a bug, a schema mismatch, corruption).
	ClassRefused
	// ClassOther: not a database error at all.
	ClassOther
)

var classNames = [...]string{"none", "not_found", "unique", "foreign_key", "check", "data", "integrity", "conflict",
	"unavailable", "canceled", "deadline", "refused", "other"}

func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return "unknown"
}

// Classify says what err means. A connection that could not be made, or
// broke, is ClassUnavailable whatever Postgres said while refusing it
// (starting up, shutting down, too many clients, authentication).
func Classify(err error) Class {
	if err == nil {
		return ClassNone
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return ClassNotFound
	}
	if errors.Is(err, context.Canceled) {
		return ClassCanceled
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return ClassDeadline
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return ClassUnavailable
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return classifySQLState(pgErr.Code)
	}
	if connectionLost(err) {
		return ClassUnavailable
	}
	return ClassOther
}

// classifySQLState maps a SQLSTATE
// (https://www.postgresql.org/docs/current/errcodes-appendix.html).
func classifySQLState(code string) Class {
	switch code {
	case "23505":
		return ClassUnique
	case "23503":
		return ClassForeignKey
	case "23514", "23502":
		return ClassCheck
	case "40001", "40P01", "55P03": // serialization failure, deadlock, lock not available
		return ClassConflict
	case "40002": // an integrity constraint checked at commit
		return ClassIntegrity
	case "40003", // statement completion unknown: the connection broke during it
		"25006",                   // read-only transaction: a standby, or a primary demoted in a failover
		"25P03",                   // idle-in-transaction timeout: the server closed the connection
		"57014",                   // query canceled (statement timeout, an admin's cancel)
		"57P01", "57P02", "57P03", // admin shutdown, crash shutdown, cannot connect now
		"57P05": // idle session timeout
		return ClassUnavailable
	}
	switch {
	case strings.HasPrefix(code, "22"):
		return ClassData
	case strings.HasPrefix(code, "23"):
		return ClassIntegrity
	case strings.HasPrefix(code, "08"), // connection exception
		strings.HasPrefix(code, "53"), // insufficient resources: disk full, out of memory, too many connections
		strings.HasPrefix(code, "58"): // system error: I/O
		return ClassUnavailable
	}
	return ClassRefused
}

// connectionLost reports an error of the connection rather than of a
// statement: a network error, the server hanging up (EOF mid-message), a
// connection pgx had already closed, a failure pgx guarantees happened
// before anything was sent, or the pool closed (the replica stopping).
func connectionLost(err error) bool {
	var netErr net.Error
	switch {
	case errors.As(err, &netErr),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, pgconn.ErrConnClosed), errors.Is(err, puddle.ErrClosedPool),
		pgconn.SafeToRetry(err), pgconn.Timeout(err):
		return true
	}
	return false
}

// IsUnavailable reports an error that means the database cannot serve now
// (ClassUnavailable): retry later, nothing is wrong with the request.
func IsUnavailable(err error) bool { return Classify(err) == ClassUnavailable }
