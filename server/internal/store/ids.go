package store

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"time"
)

// NewID makes a random server-side row id: a readable prefix ("ag_",
// "hold_", "dec_") and n random bytes in hex. Ids are opaque; n only sets
// how unlikely a collision is.
func NewID(prefix string, n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// NewOrderedID is NewID for rows inserted at a high rate into a table
// indexed by id (the decision log): the prefix, the time in milliseconds
// (12 hex digits) and 8 random bytes. Ids made later sort later, so index
// inserts go to the right edge of the B-tree instead of a random leaf:
// after each checkpoint Postgres writes every leaf it touches again whole
// (full-page writes), and with random ids that is the whole index.
func NewOrderedID(prefix string, now time.Time) string {
	var b [14]byte
	ms := uint64(now.UnixMilli())
	binary.BigEndian.PutUint16(b[0:2], uint16(ms>>32))
	binary.BigEndian.PutUint32(b[2:6], uint32(ms))
	_, _ = rand.Read(b[6:])
	return prefix + hex.EncodeToString(b[:])
}
