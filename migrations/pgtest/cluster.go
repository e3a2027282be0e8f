// Package pgtest gives tests a real Postgres: CLAWGUARD_TEST_DATABASE_URL when
// set (CI and `make test` start one cluster for the whole run), otherwise a
// throwaway cluster started from the machine's initdb/pg_ctl in a temp dir.
// Each test gets its own database cloned from a migrated template.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// EnvURL names the env var holding an admin URL of a running Postgres.
const EnvURL = "CLAWGUARD_TEST_DATABASE_URL"

// Cluster is a throwaway Postgres started by this process.
type Cluster struct {
	Dir  string
	Port int
	bin  string
	opts Options
}

// Options shape a cluster (StartClusterWith); the zero value is
// StartCluster's.
type Options struct {
	// Settings are extra "name=value" server settings, after the defaults
	// (fsync, synchronous_commit and full_page_writes off): a later one
	// wins, so "synchronous_commit=on" gives back durable commits.
	Settings []string
	// Data is the data directory ("" = Dir/data).
	Data string
	// WALDir keeps the WAL outside the data directory (initdb --waldir).
	WALDir string
}

// DataDir is the cluster's data directory.
func (c *Cluster) DataDir() string {
	if c.opts.Data != "" {
		return c.opts.Data
	}
	return filepath.Join(c.Dir, "data")
}

// URL is the admin connection URL of the cluster's "postgres" database.
func (c *Cluster) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.Port)
}

// BinDir finds the Postgres server binaries: PATH, pg_config, then Debian's
// /usr/lib/postgresql/<version>/bin.
func BinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if _, err := exec.LookPath("pg_ctl"); err == nil {
			// The real directory, where pg_basebackup is too (PATH may hold
			// links to initdb and pg_ctl alone).
			if real, err := filepath.EvalSymlinks(p); err == nil {
				p = real
			}
			return filepath.Dir(p), nil
		}
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dir := strings.TrimSpace(string(out))
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) > 0 {
		return filepath.Dir(matches[len(matches)-1]), nil
	}
	return "", errors.New("no Postgres server binaries found (install the postgresql package: apt-get install postgresql)")
}

// StartCluster initialises and starts a cluster under dir (created if
// missing) on a free loopback port. As root it runs the server as the
// "postgres" user, since initdb and postgres refuse to run as root.
func StartCluster(ctx context.Context, dir string) (*Cluster, error) {
	return StartClusterWith(ctx, dir, Options{})
}

// StartClusterWith is StartCluster shaped by o.
func StartClusterWith(ctx context.Context, dir string, o Options) (*Cluster, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create cluster dir: %w", err)
	}
	if err := chownForPostgres(dir); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, Port: port, bin: bin, opts: o}
	data := c.DataDir()
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err != nil {
		args := []string{"-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"}
		if o.WALDir != "" {
			args = append(args, "--waldir", o.WALDir)
		}
		if out, err := c.run(ctx, "initdb", args...); err != nil {
			return nil, fmt.Errorf("initdb: %w: %s", err, out)
		}
	}
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Start starts a stopped cluster again on the same port (fault tests stop
// and restart the database under a running system).
func (c *Cluster) Start(ctx context.Context) error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300", c.Port, c.Dir)
	for _, kv := range c.opts.Settings {
		opts += " -c " + kv
	}
	if out, err := c.run(ctx, "pg_ctl", "-D", c.DataDir(), "-l", filepath.Join(c.Dir, "postgres.log"), "-o", opts, "-w", "-t", "60", "start"); err != nil {
		return fmt.Errorf("pg_ctl start: %w: %s", err, out)
	}
	return nil
}

// Stop stops the cluster (fast shutdown).
func (c *Cluster) Stop() error {
	return c.StopMode("fast")
}

// StopMode stops the cluster with pg_ctl's shutdown mode: "smart", "fast",
// or "immediate" (every process quits at once, no checkpoint: what a crash
// leaves, replayed from the WAL at the next start).
func (c *Cluster) StopMode(mode string) error {
	out, err := c.run(context.Background(), "pg_ctl", "-D", c.DataDir(), "-m", mode, "-w", "stop")
	if err != nil {
		return fmt.Errorf("pg_ctl stop: %w: %s", err, out)
	}
	return nil
}

func (c *Cluster) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	path := filepath.Join(c.bin, name)
	var cmd *exec.Cmd
	if os.Geteuid() == 0 {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	cmd.Dir = c.Dir
	return cmd.CombinedOutput()
}

func chownForPostgres(dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("running as root needs a \"postgres\" user to own the cluster: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return fmt.Errorf("chown cluster dir: %w", err)
	}
	// The temp dir's parents must be traversable by the postgres user.
	for p := filepath.Dir(dir); p != "/" && p != "."; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o001 == 0 {
			_ = os.Chmod(p, fi.Mode().Perm()|0o011)
		}
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
