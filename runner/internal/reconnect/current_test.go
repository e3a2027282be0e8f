package reconnect

import (
	"testing"
	"time"
)

// TestRestartIfBeforeEndsOnlyAnOlderStream: a stream opened before the
// move is ended once; one opened since is left alone, and none is a no-op.
func TestRestartIfBeforeEndsOnlyAnOlderStream(t *testing.T) {
	var c Current
	if c.RestartIfBefore(time.Now()) {
		t.Fatal("restarted with no stream")
	}
	ended := 0
	c.Set(func() { ended++ })
	moved := time.Now().Add(time.Second)
	if !c.RestartIfBefore(moved) || ended != 1 {
		t.Fatalf("an older stream: restarted=%d, want 1", ended)
	}
	if c.RestartIfBefore(moved) || ended != 1 {
		t.Fatal("the same stream ended twice")
	}
	c.Set(func() { ended++ })
	if c.RestartIfBefore(time.Now().Add(-time.Minute)) || ended != 1 {
		t.Fatal("a stream opened after the move was ended")
	}
	c.Clear()
	if c.RestartIfBefore(time.Now().Add(time.Hour)) {
		t.Fatal("a cleared stream was ended")
	}
}
