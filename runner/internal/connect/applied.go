package connect

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Applied remembers which pushes were applied, in a file under the data dir,
// so a push re-sent after a reconnect or a runner restart is acknowledged
// without being applied twice. It keeps the last max ids.
type Applied struct {
	mu    sync.Mutex
	path  string
	f     *os.File
	ids   map[string]struct{}
	order []string
	max   int
	lines int // lines in the file; compacted past 2*max
}

// OpenApplied loads (or creates) the log at path.
func OpenApplied(path string, max int) (*Applied, error) {
	if max <= 0 {
		max = 10000
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("applied pushes: %w", err)
	}
	a := &Applied{path: path, ids: map[string]struct{}{}, max: max}
	if f, err := os.Open(path); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if id := strings.TrimSpace(sc.Text()); id != "" {
				a.add(id)
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("read applied pushes: %w", err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read applied pushes: %w", err)
	}
	if err := a.rewrite(); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *Applied) add(id string) {
	if _, ok := a.ids[id]; ok {
		return
	}
	a.ids[id] = struct{}{}
	a.order = append(a.order, id)
	for len(a.order) > a.max {
		delete(a.ids, a.order[0])
		a.order = a.order[1:]
	}
}

// rewrite compacts the file to the ids kept in memory.
func (a *Applied) rewrite() error {
	tmp := a.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("write applied pushes: %w", err)
	}
	w := bufio.NewWriter(f)
	for _, id := range a.order {
		w.WriteString(id + "\n")
	}
	if err := errors.Join(w.Flush(), f.Sync(), f.Close()); err != nil {
		return fmt.Errorf("write applied pushes: %w", err)
	}
	if err := os.Rename(tmp, a.path); err != nil {
		return fmt.Errorf("write applied pushes: %w", err)
	}
	if a.f != nil {
		a.f.Close()
	}
	a.lines = len(a.order)
	a.f, err = os.OpenFile(a.path, os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("open applied pushes: %w", err)
	}
	return nil
}

// Seen reports whether id was applied.
func (a *Applied) Seen(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.ids[id]
	return ok
}

// Mark records id as applied, durably, before the push is acknowledged.
func (a *Applied) Mark(id string) error {
	if id == "" || strings.ContainsAny(id, "\n\r") {
		return fmt.Errorf("applied pushes: bad push id %q", id)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.ids[id]; ok {
		return nil
	}
	a.add(id)
	if _, err := a.f.WriteString(id + "\n"); err != nil {
		return fmt.Errorf("append applied push: %w", err)
	}
	if err := a.f.Sync(); err != nil {
		return fmt.Errorf("sync applied pushes: %w", err)
	}
	if a.lines++; a.lines > 2*a.max {
		return a.rewrite()
	}
	return nil
}

// Close closes the file.
func (a *Applied) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return nil
	}
	err := a.f.Close()
	a.f = nil
	return err
}
