package store

import (
	"context"
	"fmt"
)

// Replication is what the database the server writes to says about its
// standbys: whether a commit it acknowledges is also on a standby that a
// failover would promote. An approval is acknowledged once committed; on a
// primary without a synchronous standby, a failover can promote a standby
// that never received it, and the approval comes back pending.
type Replication struct {
	// InRecovery: the database is itself a standby (read-only).
	InRecovery bool
	// StandbyNames is synchronous_standby_names ("" = none is synchronous).
	StandbyNames string
	// Commit is synchronous_commit as the server's connections see it.
	Commit string
	// Standbys is how many standbys stream from it.
	Standbys int
	// Synchronous is how many of them are synchronous (sync or quorum
	// members); -1 when the server's role may not read sync_state
	// (pg_stat_replication shows its details only to pg_read_all_stats).
	Synchronous int
}

// The modes of Replication.Mode, the label values of its gauge.
const (
	ReplicationSynchronous  = "synchronous"  // every acknowledged commit is on a synchronous standby
	ReplicationAsynchronous = "asynchronous" // standbys, none synchronous: a failover can lose acknowledged commits
	ReplicationNone         = "none"         // no standby streams from it
	ReplicationStandby      = "standby"      // the server is connected to a standby
	ReplicationUnknown      = "unknown"      // the role may not read sync_state
)

// ReplicationModes lists every mode (metric label values).
var ReplicationModes = []string{ReplicationSynchronous, ReplicationAsynchronous, ReplicationNone, ReplicationStandby, ReplicationUnknown}

// ReadReplication asks the database (one cheap statement).
func ReadReplication(ctx context.Context, q Querier) (Replication, error) {
	var r Replication
	var hidden int
	err := q.QueryRow(ctx, `SELECT pg_is_in_recovery(), current_setting('synchronous_standby_names'), current_setting('synchronous_commit'),
		count(w.pid), count(w.pid) FILTER (WHERE w.sync_state IN ('sync', 'quorum')), count(w.pid) FILTER (WHERE w.sync_state IS NULL)
		FROM (SELECT 1) AS one LEFT JOIN pg_stat_replication w ON true`).Scan(&r.InRecovery, &r.StandbyNames, &r.Commit, &r.Standbys, &r.Synchronous, &hidden)
	if err != nil {
		return Replication{}, fmt.Errorf("read replication state: %w", err)
	}
	if hidden > 0 && r.Synchronous == 0 {
		r.Synchronous = -1
	}
	return r, nil
}

// commitWaitsForStandby: synchronous_commit values that wait for a
// synchronous standby (off and local do not).
func (r Replication) commitWaitsForStandby() bool {
	switch r.Commit {
	case "on", "remote_write", "remote_apply":
		return true
	}
	return false
}

// Mode is one of the Replication* modes.
func (r Replication) Mode() string {
	switch {
	case r.InRecovery:
		return ReplicationStandby
	case r.StandbyNames == "" || !r.commitWaitsForStandby():
		if r.Standbys == 0 {
			return ReplicationNone
		}
		return ReplicationAsynchronous
	case r.Synchronous > 0:
		return ReplicationSynchronous
	case r.Synchronous < 0:
		return ReplicationUnknown
	case r.Standbys == 0:
		return ReplicationNone
	}
	return ReplicationAsynchronous
}

// Words says what the mode means for an acknowledged approval.
func (r Replication) Words() string {
	switch r.Mode() {
	case ReplicationStandby:
		return "the database is a standby (read-only): writes fail until it is promoted, or the server is pointed at the primary"
	case ReplicationSynchronous:
		return fmt.Sprintf("primary with %d synchronous standby(s): an acknowledged commit survives a failover to one", r.Synchronous)
	case ReplicationUnknown:
		return "primary with standbys whose sync state this role may not read (grant pg_monitor to the server's role)"
	case ReplicationNone:
		if r.StandbyNames != "" && r.commitWaitsForStandby() {
			return "primary with synchronous_standby_names set and no standby connected: commits wait until one is"
		}
		return "primary with no standby: a failover has nothing to promote; what is acknowledged lives on this server's disk alone"
	}
	if r.StandbyNames == "" {
		return fmt.Sprintf("primary with %d standby(s), none synchronous (synchronous_standby_names is empty): an approval acknowledged just before a failover can be lost", r.Standbys)
	}
	if !r.commitWaitsForStandby() {
		return fmt.Sprintf("primary with %d standby(s) and synchronous_commit = %s: commits do not wait for a standby; an approval acknowledged just before a failover can be lost", r.Standbys, r.Commit)
	}
	return fmt.Sprintf("primary with %d standby(s), none synchronous now: an approval acknowledged just before a failover can be lost", r.Standbys)
}
