package pgtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// StartStandby makes a streaming standby of primary under dir (a base
// backup with pg_basebackup -R, so it follows the primary from where the
// backup ends) and starts it on a free port. name is its application_name,
// what the primary's synchronous_standby_names and pg_stat_replication
// call it. o's settings apply to it as to a cluster of its own.
func StartStandby(ctx context.Context, primary *Cluster, dir, name string, o Options) (*Cluster, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create standby dir: %w", err)
	}
	if err := chownForPostgres(dir); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &Cluster{Dir: dir, Port: port, bin: primary.bin, opts: o}
	conn := fmt.Sprintf("host=127.0.0.1 port=%d user=postgres application_name=%s", primary.Port, name)
	if out, err := s.run(ctx, "pg_basebackup", "-d", conn, "-D", s.DataDir(), "-R", "-X", "stream", "-c", "fast", "--no-sync"); err != nil {
		return nil, fmt.Errorf("pg_basebackup: %w: %s", err, out)
	}
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Promote makes a standby the primary (pg_ctl promote, waiting until it is).
func (c *Cluster) Promote(ctx context.Context) error {
	if out, err := c.run(ctx, "pg_ctl", "-D", c.DataDir(), "-w", "-t", "60", "promote"); err != nil {
		return fmt.Errorf("pg_ctl promote: %w: %s", err, out)
	}
	return nil
}

// Log is the cluster's server log so far.
func (c *Cluster) Log() string {
	b, _ := os.ReadFile(filepath.Join(c.Dir, "postgres.log"))
	return string(b)
}

// Rejoin brings a stopped old primary back the way a fenced one must come
// back: as a standby of the new primary, on its old port (first in the
// servers' DSN), its data directory replaced by a base backup of the new
// primary (pg_basebackup -R), named name. It never starts read-write.
func (c *Cluster) Rejoin(ctx context.Context, primary *Cluster, name string) error {
	data := c.DataDir()
	if err := os.RemoveAll(data); err != nil {
		return fmt.Errorf("remove the old primary's data: %w", err)
	}
	if err := os.MkdirAll(data, 0o700); err != nil {
		return fmt.Errorf("recreate the data dir: %w", err)
	}
	if err := chownForPostgres(data); err != nil {
		return err
	}
	conn := fmt.Sprintf("host=127.0.0.1 port=%d user=postgres application_name=%s", primary.Port, name)
	if out, err := c.run(ctx, "pg_basebackup", "-d", conn, "-D", data, "-R", "-X", "stream", "-c", "fast", "--no-sync"); err != nil {
		return fmt.Errorf("pg_basebackup: %w: %s", err, out)
	}
	return c.Start(ctx)
}
