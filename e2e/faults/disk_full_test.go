package faults

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/clawguard/clawguard/migrations/pgtest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// smallDisk mounts a tmpfs of size for a Postgres data directory and
// returns the mount point (owned by the postgres user) and a directory
// beside it on the ordinary disk (for the WAL). Mounting needs root, as CI
// runs the suite; without it the test fails, saying so.
func smallDisk(t *testing.T, size string) (mnt, beside string) {
	t.Helper()
	base, err := os.MkdirTemp("", "cgf-disk-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	mnt = filepath.Join(base, "small")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0755", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount a %s tmpfs for Postgres' data (the full-disk fault needs root and mount): %v: %s", size, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", mnt).CombinedOutput(); err != nil {
			t.Logf("umount %s: %v: %s", mnt, err, out)
		}
	})
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatal(err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, d := range []string{base, mnt} {
			if err := os.Chown(d, uid, gid); err != nil {
				t.Fatal(err)
			}
		}
	}
	return mnt, base
}

// fill writes a file on dir's filesystem until it has no space left; the
// returned func frees it.
func fill(t *testing.T, dir string) func() {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, chunk := range []int{1 << 20, 4 << 10} {
		buf := make([]byte, chunk)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatal(err)
				}
				break
			}
		}
	}
	return func() { _ = os.Remove(path) }
}

// Issue 29 (12): Postgres's disk filled for 20 s and every approval clicked
// meanwhile was answered "Internal: hold: the database refused the
// operation" (SQLSTATE 53100), never retried. The data directory lives on a
// small tmpfs here (the WAL beside it, so Postgres keeps running) and is
// filled while an approver clicks and replays run: every click is answered
// Unavailable with a hint while the disk is full, lands once there is space
// again, and every approved hold is applied once.
func TestPostgresDiskFullWhileApproving(t *testing.T) {
	mnt, beside := smallDisk(t, "192m")
	s := newSystemWith(t, systemOptions{pg: pgtest.Options{Data: filepath.Join(mnt, "data"), WALDir: filepath.Join(beside, "wal")}})
	x := newA2A(t, s, true, true)
	x.startRunners()
	const n = 200
	ids := x.holds(t, "disk", n)
	token := strings.TrimSpace(readFile(t, s.tokenFile))
	clients := []guardv1.ApprovalsClient{guardv1.NewApprovalsClient(s.op), guardv1.NewApprovalsClient(dial(t, s.addrs[1], token))}

	c := newClicks()
	var wg sync.WaitGroup
	ctx := ctxT(t)
	fifth := make(chan struct{})
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i, id := range ids {
			if i == n/5 {
				close(fifth)
			}
			<-tick.C
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.approveRetrying(ctx, clients[i%2], id, "telegram:dana")
			}()
		}
	}()
	<-fifth
	free := fill(t, mnt)
	filled := time.Now()
	time.Sleep(10 * time.Second) // the disk stays full (a fault's length, not a wait for a condition)
	free()
	t.Logf("the disk was full for %.1fs", time.Since(filled).Seconds())
	waitFor(t, 2*time.Minute, "every click answered", func() (bool, string) {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.told) == n, fmt.Sprintf("%d of %d answered", len(c.told), n)
	})
	wg.Wait()
	t.Logf("clicks: %s", c)
	if !strings.Contains(s.pg.Log(), "No space left on device") {
		t.Fatal("Postgres never ran out of space: the fault did not happen")
	}
	c.mu.Lock()
	internal, unavailable := c.answers[codes.Internal], c.answers[codes.Unavailable]
	c.mu.Unlock()
	told := c.approvedOK()
	if internal != 0 || len(told) != n || unavailable == 0 {
		t.Fatalf("clicks answered Internal: %d, Unavailable: %d; approved after retrying: %d of %d (%s)", internal, unavailable, len(told), n, c)
	}
	tl := x.settle(t, "postgres disk full 10s while approving", told, "disk", filled, 3*time.Minute)
	if n := x.resent(t, told); n != 0 {
		t.Fatalf("%d approved holds were applied only when the reconciler replayed them again: their first replay gave up", n)
	}
	t.Logf("FIGURES fault=%q approved=%d lost=%d doubled=%d clicks_unavailable=%d clicks_internal=%d",
		"postgres disk full 10s while approving", tl.approved, tl.lost, tl.doubled, unavailable, internal)
}
