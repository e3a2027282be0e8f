// Package paging is how every List RPC pages: a limit with a documented
// default and maximum (anything else is InvalidArgument saying what is
// allowed, never silently another number), and an opaque page token that
// is a keyset position — the sort keys of the last row returned — bound to
// the query's filters, so a token is never applied to another query.
package paging

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/clawguard/clawguard/server/internal/fault"
)

// Page sizes every List RPC shares.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// Limit resolves a request's limit: 0 is DefaultLimit, 1..MaxLimit as
// given; a negative or larger one is InvalidArgument.
func Limit(n int32) (int, error) {
	switch {
	case n == 0:
		return DefaultLimit, nil
	case n < 0 || n > MaxLimit:
		return 0, fault.New(fault.Invalid, "limit: %d is out of range: 1..%d per page (0 = %d); page through with page_token", n, MaxLimit, DefaultLimit)
	}
	return int(n), nil
}

// Cursor is a keyset position: the (time, id) sort keys of the last row of
// the previous page.
type Cursor struct {
	At     time.Time `json:"t"`
	Key    string    `json:"k,omitempty"`  // lists sorted by a text key (NextKey)
	Keys   []string  `json:"ks,omitempty"` // lists sorted by several text keys (NextKeys)
	ID     string    `json:"i"`
	Filter string    `json:"f"`
}

// Filter fingerprints a query's filters (the page token carries it).
func Filter(parts ...any) string {
	b, _ := json.Marshal(parts)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// Next is the token of the page after the row (at, id) under filter.
func Next(at time.Time, id, filter string) string {
	b, _ := json.Marshal(Cursor{At: at.UTC(), ID: id, Filter: filter})
	return base64.RawURLEncoding.EncodeToString(b)
}

// Decode reads a page token for a query with filter: nil for the first
// page (""), InvalidArgument for a token that does not parse or was issued
// for other filters.
func Decode(token, filter string) (*Cursor, error) { return decode(token, filter, true) }

// NextKey is the token of the page after the row (key, id) under filter,
// for lists sorted by a text key (a name) rather than a time.
func NextKey(key, id, filter string) string {
	b, _ := json.Marshal(Cursor{Key: key, ID: id, Filter: filter})
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeKey reads a NextKey token as Decode reads a Next one.
func DecodeKey(token, filter string) (*Cursor, error) { return decode(token, filter, false) }

// decode reads a token of either kind: timed says a Next token (an at)
// rather than a NextKey one (no at).
func decode(token, filter string, timed bool) (*Cursor, error) {
	if token == "" {
		return nil, nil
	}
	bad := func(why string) error {
		return fault.New(fault.Invalid, "page_token: %s; pass next_page_token from the previous page of the same query", why)
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return nil, bad("not a page token")
	}
	var c Cursor
	if err := json.Unmarshal(b, &c); err != nil || c.ID == "" || c.At.IsZero() == timed {
		return nil, bad("not a page token")
	}
	if c.Filter != filter {
		return nil, bad("issued for other filters")
	}
	return &c, nil
}

// NextKeys is the token of the page after the row whose sort keys are keys
// under filter, for lists sorted by several text columns.
func NextKeys(filter string, keys ...string) string {
	b, _ := json.Marshal(Cursor{Keys: keys, Filter: filter})
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeKeys reads a NextKeys token of n keys as Decode reads a Next one.
func DecodeKeys(token, filter string, n int) (*Cursor, error) {
	if token == "" {
		return nil, nil
	}
	bad := func(why string) error {
		return fault.New(fault.Invalid, "page_token: %s; pass next_page_token from the previous page of the same query", why)
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return nil, bad("not a page token")
	}
	var c Cursor
	if err := json.Unmarshal(b, &c); err != nil || len(c.Keys) != n || c.ID != "" || !c.At.IsZero() {
		return nil, bad("not a page token")
	}
	if c.Filter != filter {
		return nil, bad("issued for other filters")
	}
	return &c, nil
}
