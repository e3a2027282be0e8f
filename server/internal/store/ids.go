package store

import (
	"crypto/rand"
	"encoding/hex"
)

// NewID makes a random server-side row id: a readable prefix ("ag_",
// "hold_", "dec_") and n random bytes in hex. Ids are opaque; n only sets
// how unlikely a collision is (decisions, the most numerous rows, use more).
func NewID(prefix string, n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}
