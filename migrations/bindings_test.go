package migrations_test

import (
	"context"
	"testing"

	"github.com/clawguard/clawguard/migrations"
	"github.com/clawguard/clawguard/migrations/pgtest"
)

// Tokens minted before 0100 carry over unbound: runner tokens without host
// or labels, bridge tokens without channels (each then fails closed in its
// own way, see SECURITY.md), and only runners take placement, only bridges
// channels.
func TestPrincipalBindingsCarryTokens(t *testing.T) {
	ctx := context.Background()
	db := pool(t, pgtest.NewEmptyDB(t))
	if _, err := migrations.Apply(ctx, db, 60); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO tokens (id, kind, name, hash, runner_id) VALUES ('tok-r', 'runner', 'old runner', 'h1', 'r1')`,
		`INSERT INTO tokens (id, kind, name, hash) VALUES ('tok-b', 'bridge', 'old bridge', 'h2')`,
	} {
		if _, err := db.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := migrations.Apply(ctx, db, 0); err != nil {
		t.Fatal(err)
	}
	var host, labels string
	var channels []string
	if err := db.QueryRow(ctx, `SELECT host, labels::text, channels FROM tokens WHERE id = 'tok-r'`).Scan(&host, &labels, &channels); err != nil {
		t.Fatal(err)
	}
	if host != "" || labels != "{}" || len(channels) != 0 {
		t.Fatalf("old runner token = host %q labels %s channels %v, want unbound", host, labels, channels)
	}
	if err := db.QueryRow(ctx, `SELECT channels FROM tokens WHERE id = 'tok-b'`).Scan(&channels); err != nil || len(channels) != 0 {
		t.Fatalf("old bridge token channels = %v (%v), want none", channels, err)
	}
	for name, q := range map[string]string{
		"a host on a bridge token":     `UPDATE tokens SET host = 'h' WHERE id = 'tok-b'`,
		"labels on a bridge token":     `UPDATE tokens SET labels = '{"gpu":"1"}' WHERE id = 'tok-b'`,
		"channels on a runner token":   `UPDATE tokens SET channels = '{telegram}' WHERE id = 'tok-r'`,
		"labels that are not a object": `UPDATE tokens SET labels = '["gpu"]' WHERE id = 'tok-r'`,
	} {
		if _, err := db.Exec(ctx, q); err == nil {
			t.Errorf("%s: accepted, want a check violation", name)
		}
	}
}
