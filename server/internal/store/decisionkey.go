package store

import (
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// DecisionKey is the condition that finds the decision id by the log's
// primary key (at, id) (migration 0440), as SQL over three parameters
// numbered from first, and their arguments. A decision id carries the
// millisecond its row's at was read at (NewOrderedID, one clock
// reading in answer), so the row lies in that millisecond; the bounds
// allow one either side. An id that does not carry a time since ordered
// ids began — a decision logged before them, or no decision id at all —
// is looked for by id alone, across the log (the same SQL, unbounded).
func DecisionKey(first int, id string) (string, []any) {
	return DecisionKeySQL(first), DecisionKeyArgs(id)
}

// DecisionKeySQL is DecisionKey's condition alone, for a statement built
// once; DecisionKeyArgs are its arguments for one id.
func DecisionKeySQL(first int) string {
	p := func(i int) string { return "$" + strconv.Itoa(first+i) }
	return "id = " + p(0) + " AND at >= " + p(1) + "::timestamptz AND at < " + p(2) + "::timestamptz"
}

// DecisionKeyArgs are DecisionKeySQL's three arguments for id.
func DecisionKeyArgs(id string) []any {
	at, ok := decisionTime(id, time.Now())
	if !ok {
		return []any{id, pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true},
			pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true}}
	}
	return []any{id, at.Add(-time.Millisecond), at.Add(2 * time.Millisecond)}
}

// orderedIDsSince is when decision ids began to carry their time (before,
// they were random): an id whose time falls before it, or after now, is not
// read as a time.
var orderedIDsSince = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

// decisionTime is the millisecond a decision id carries (dec_ and 28 hex
// digits, the first 12 the Unix milliseconds).
func decisionTime(id string, now time.Time) (time.Time, bool) {
	hexPart, ok := strings.CutPrefix(id, "dec_")
	if !ok || len(hexPart) != 28 {
		return time.Time{}, false
	}
	b, err := hex.DecodeString(hexPart[:12])
	if err != nil {
		return time.Time{}, false
	}
	var ms int64
	for _, c := range b {
		ms = ms<<8 | int64(c)
	}
	at := time.UnixMilli(ms)
	if at.Before(orderedIDsSince) || at.After(now.Add(time.Minute)) {
		return time.Time{}, false
	}
	return at, true
}
