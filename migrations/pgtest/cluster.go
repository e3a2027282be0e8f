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
	c := &Cluster{Dir: dir, Port: port, bin: bin}
	data := filepath.Join(dir, "data")
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err != nil {
		if out, err := c.run(ctx, "initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
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
	if out, err := c.run(ctx, "pg_ctl", "-D", filepath.Join(c.Dir, "data"), "-l", filepath.Join(c.Dir, "postgres.log"), "-o", opts, "-w", "-t", "60", "start"); err != nil {
		return fmt.Errorf("pg_ctl start: %w: %s", err, out)
	}
	return nil
}

// Stop stops the cluster (fast shutdown).
func (c *Cluster) Stop() error {
	out, err := c.run(context.Background(), "pg_ctl", "-D", filepath.Join(c.Dir, "data"), "-m", "fast", "-w", "stop")
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
