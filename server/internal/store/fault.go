package store

import (
	"fmt"

	"github.com/clawguard/clawguard/server/internal/fault"
)

// Fault is a database error as the fault it means for the request that met
// it, made where the SQL ran: what names the object ("group", "role
// grant"). A missing row is NotFound only here, where the caller knows
// what the row was; a database that cannot serve now is Unavailable with
// a retry hint; the database's own text stays in the fault's cause, for
// the log. Context errors and errors that are not the database's pass
// through, wrapped with what (a stream's own status among them: api.Status
// answers it as the edge made it).
func Fault(what string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := fault.As(err); ok {
		return err
	}
	switch class := Classify(err); class {
	case ClassNotFound:
		return fault.Wrap(fault.NotFound, err, "%s not found", what)
	case ClassUnique:
		return fault.Wrap(fault.Exists, err, "%s already exists", what)
	case ClassForeignKey:
		return fault.Wrap(fault.NotFound, err, "%s refers to something that does not exist (%s)", what, ConstraintName(err))
	case ClassCheck:
		return fault.Wrap(fault.Invalid, err, "%s: value refused by the schema (%s)", what, ConstraintName(err))
	case ClassData:
		return fault.Wrap(fault.Invalid, err, "%s: a value is malformed or too long to store", what)
	case ClassIntegrity:
		return fault.Wrap(fault.Precondition, err, "%s: refused by a constraint (%s)", what, ConstraintName(err))
	case ClassConflict:
		return fault.Wrap(fault.Aborted, err, "%s: conflicted with a concurrent change; try again", what)
	case ClassUnavailable:
		return fault.Unavailablef(fault.DefaultRetryAfter, err, "%s: the database is unavailable; retry", what)
	case ClassRefused:
		// Postgres answered and refused: retrying changes nothing.
		return fault.Wrap(fault.Internal, err, "%s: the database refused the operation", what)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Faulted turns *err into store.Fault(what, *err): deferred first thing in
// a method whose queries all concern what, it classifies every database
// error the method returns where its SQL ran.
func Faulted(err *error, what string) {
	if *err != nil {
		*err = Fault(what, *err)
	}
}
