package store_test

import (
	"strings"
	"testing"

	"github.com/clawguard/clawguard/server/internal/store"
)

// What the database says about its standbys, in the words an operator
// reads: only a primary with a synchronous standby keeps an acknowledged
// approval through a failover.
func TestReplicationModesSayWhatAFailoverKeeps(t *testing.T) {
	for _, c := range []struct {
		r     store.Replication
		mode  string
		words string
	}{
		{store.Replication{Commit: "on"}, store.ReplicationNone, "no standby"},
		{store.Replication{Commit: "on", StandbyNames: "s1"}, store.ReplicationNone, "commits wait until one is"},
		{store.Replication{Commit: "on", Standbys: 1}, store.ReplicationAsynchronous, "synchronous_standby_names is empty"},
		{store.Replication{Commit: "on", StandbyNames: "s1", Standbys: 2, Synchronous: 1}, store.ReplicationSynchronous, "1 synchronous standby"},
		{store.Replication{Commit: "local", StandbyNames: "s1", Standbys: 1, Synchronous: 1}, store.ReplicationAsynchronous, "synchronous_commit = local"},
		{store.Replication{Commit: "on", StandbyNames: "s1", Standbys: 1}, store.ReplicationAsynchronous, "none synchronous now"},
		{store.Replication{Commit: "on", StandbyNames: "s1", Standbys: 1, Synchronous: -1}, store.ReplicationUnknown, "grant pg_monitor"},
		{store.Replication{InRecovery: true, Commit: "on"}, store.ReplicationStandby, "is a standby"},
	} {
		if got := c.r.Mode(); got != c.mode {
			t.Errorf("%+v: mode %s, want %s", c.r, got, c.mode)
		}
		if got := c.r.Words(); !strings.Contains(got, c.words) {
			t.Errorf("%+v: %q lacks %q", c.r, got, c.words)
		}
	}
}
