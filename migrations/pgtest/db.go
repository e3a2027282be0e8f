package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/clawguard/clawguard/migrations"
)

var (
	mu       sync.Mutex
	adminURL string
	cluster  *Cluster
	template string
)

// Main wraps testing.M: it makes a Postgres available for the package's
// tests (starting a throwaway cluster when no URL is given) and stops what
// it started. Use it from TestMain: os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	mu.Lock()
	defer mu.Unlock()
	if cluster != nil {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
		}
		_ = os.RemoveAll(cluster.Dir)
	}
	return code
}

// AdminURL returns the URL of a running Postgres, starting one if needed.
func AdminURL(tb testing.TB) string {
	tb.Helper()
	mu.Lock()
	defer mu.Unlock()
	if adminURL != "" {
		return adminURL
	}
	if u := os.Getenv(EnvURL); u != "" {
		adminURL = u
		return adminURL
	}
	dir, err := os.MkdirTemp("", "clawguard-pg-")
	if err != nil {
		tb.Fatalf("pgtest: temp dir: %v", err)
	}
	c, err := StartCluster(context.Background(), dir)
	if err != nil {
		tb.Fatalf("pgtest: no Postgres for tests (set %s or install Postgres): %v", EnvURL, err)
	}
	cluster, adminURL = c, c.URL()
	return adminURL
}

// NewDB returns the URL of a fresh database migrated to the latest version,
// dropped when the test ends.
func NewDB(tb testing.TB) string {
	tb.Helper()
	admin := AdminURL(tb)
	tpl := migratedTemplate(tb, admin)
	return createDB(tb, admin, tpl)
}

// NewEmptyDB returns the URL of a fresh, unmigrated database.
func NewEmptyDB(tb testing.TB) string {
	tb.Helper()
	return createDB(tb, AdminURL(tb), "template0")
}

// NewPool is NewDB plus a pool closed at the end of the test.
func NewPool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	pool, err := pgxpool.New(context.Background(), NewDB(tb))
	if err != nil {
		tb.Fatalf("pgtest: pool: %v", err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

func migratedTemplate(tb testing.TB, admin string) string {
	mu.Lock()
	defer mu.Unlock()
	if template != "" {
		return template
	}
	name := "clawguard_tpl_" + randomSuffix()
	ctx := context.Background()
	if err := execSQL(ctx, admin, fmt.Sprintf("CREATE DATABASE %s TEMPLATE template0", name)); err != nil {
		tb.Fatalf("pgtest: create template: %v", err)
	}
	pool, err := pgxpool.New(ctx, withDB(admin, name))
	if err != nil {
		tb.Fatalf("pgtest: template pool: %v", err)
	}
	_, err = migrations.Apply(ctx, pool, 0)
	pool.Close()
	if err != nil {
		tb.Fatalf("pgtest: migrate template: %v", err)
	}
	template = name
	return template
}

func createDB(tb testing.TB, admin, tpl string) string {
	name := "clawguard_t_" + randomSuffix()
	ctx := context.Background()
	// CREATE DATABASE ... TEMPLATE fails while another session is connected
	// to the template, so clones from this process are serialised.
	mu.Lock()
	err := execSQL(ctx, admin, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, tpl))
	mu.Unlock()
	if err != nil {
		tb.Fatalf("pgtest: create database: %v", err)
	}
	tb.Cleanup(func() {
		_ = execSQL(context.Background(), admin, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name))
	})
	return withDB(admin, name)
}

func execSQL(ctx context.Context, url, sql string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

func withDB(raw, db string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	u.Path = "/" + db
	return u.String()
}

func randomSuffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
