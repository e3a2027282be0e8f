package mcpface

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func queueIDs(items []item) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.ID)
	}
	return out
}

// A crash mid-append leaves a torn last line: the queue opens with every
// whole record, and what is appended next is not glued to the torn one.
func TestTheQueueSurvivesATornLastLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "inbox.jsonl")
	q, _, err := openQueue(path, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c"} {
		if err := q.add(item{ID: id, Kind: "message", Text: id}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.read("b"); err != nil {
		t.Fatal(err)
	}
	q.close()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"add":{"id":"d","kind":"mess`)
	f.Close()

	q, unread, err := openQueue(path, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := queueIDs(unread); !slices.Equal(got, []string{"a", "c"}) || !q.known("b") || q.known("d") {
		t.Fatalf("reopened: unread %v, b known %v, d known %v", got, q.known("b"), q.known("d"))
	}
	if err := q.add(item{ID: "e", Kind: "message"}); err != nil {
		t.Fatal(err)
	}
	q.close()
	q, unread, err = openQueue(path, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q.close()
	if got := queueIDs(unread); !slices.Equal(got, []string{"a", "c", "e"}) {
		t.Fatalf("after an append past the torn line: %v", got)
	}
}

// The log is compacted: it stays within a bound of the unread items and
// the read ids remembered, whatever passed through it.
func TestTheQueueIsCompacted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "inbox.jsonl")
	q, _, err := openQueue(path, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q.close()
	q.remember = 100 // maxRemembered's role, in fewer syncs
	big := strings.Repeat("x", 4096)
	const n = 600
	for i := range n {
		id := fmt.Sprintf("push_%d", i)
		if err := q.add(item{ID: id, Kind: "message", Text: big}); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			continue // one stays unread
		}
		if err := q.read(id); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// Compacted at 1 MiB past what it must hold; 600 items are 2.4 MiB.
	if limit := int64(1<<20 + 64<<10); fi.Size() > limit {
		t.Fatalf("the log is %d bytes after %d items went through it (bound %d)", fi.Size(), n, limit)
	}
	if len(q.doneOrder) != 100 || !q.known(fmt.Sprintf("push_%d", n-1)) || q.known("push_1") {
		t.Fatalf("remembered %d read ids", len(q.doneOrder))
	}
	if !q.known("push_0") || len(q.unread) != 1 {
		t.Fatalf("the unread item was compacted away")
	}
}

// The bounds: at most max unread items, and maxBytes of them (an empty
// queue takes any one item); a read frees room.
func TestTheQueueIsBounded(t *testing.T) {
	q, _, err := openQueue(filepath.Join(t.TempDir(), "inbox.jsonl"), 2, 300)
	if err != nil {
		t.Fatal(err)
	}
	defer q.close()
	if err := q.add(item{ID: "huge", Text: string(make([]byte, 1000))}); err != nil {
		t.Fatalf("an empty queue refused an item: %v", err)
	}
	if err := q.add(item{ID: "small"}); !errors.Is(err, errQueueFull) {
		t.Fatalf("past maxBytes: %v, want full", err)
	}
	if err := q.read("huge"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		if err := q.add(item{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.add(item{ID: "c"}); !errors.Is(err, errQueueFull) {
		t.Fatalf("past max: %v, want full", err)
	}
}

// One process owns a queue: a second open is refused until the first
// closes (a process that dies releases it too: the lock is the kernel's).
func TestTheQueueHasOneOwner(t *testing.T) {
	path := filepath.Join(t.TempDir(), "inbox.jsonl")
	q, _, err := openQueue(path, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := openQueue(path, 0, 0); !errors.Is(err, errQueueLocked) {
		t.Fatalf("second open: %v, want locked", err)
	}
	q.close()
	if err := q.add(item{ID: "late"}); !errors.Is(err, errQueueClosed) {
		t.Fatalf("an add after close: %v, want refused", err)
	}
	q2, _, err := openQueue(path, 0, 0)
	if err != nil {
		t.Fatalf("open after close: %v", err)
	}
	q2.close()
}
