package resources_test

import (
	"context"
	"regexp"
	"testing"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"

	"github.com/clawguard/clawguard/server/internal/resources"
)

// Every path that creates a group goes through CreateGroupTx: one id shape,
// a trimmed name, a config row; a taken name is refused or suffixed as the
// caller says.
func TestCreateGroupTxIsTheOneWayAGroupIsCreated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, _ := start(t)
	create := func(name string, taken resources.TakenName) (id, got string, err error) {
		err = pgx.BeginFunc(ctx, srv.Pool, func(tx pgx.Tx) error {
			var err error
			id, got, err = resources.CreateGroupTx(ctx, tx, resources.NewGroup{Name: name, Instructions: "hi"}, taken)
			return err
		})
		return id, got, err
	}
	id, name, err := create("  helper  ", resources.RefuseTakenName)
	if err != nil || name != "helper" || !regexp.MustCompile(`^ag_[0-9a-f]{16}$`).MatchString(id) {
		t.Fatalf("created %q %q (%v), want an ag_ + 16 hex id named helper", id, name, err)
	}
	if n := count(t, srv, `SELECT count(*) FROM agent_groups g JOIN container_configs c ON c.agent_group_id = g.id
		WHERE g.id = $1 AND g.instructions = 'hi' AND c.cli_scope = 'group'`, id); n != 1 {
		t.Fatal("the group was created without its instructions or its config row")
	}
	_, _, err = create("helper", resources.RefuseTakenName)
	wantCode(t, err, codes.AlreadyExists, "helper")
	for _, want := range []string{"helper-2", "helper-3"} {
		if _, name, err := create("helper", resources.SuffixTakenName); err != nil || name != want {
			t.Fatalf("suffixed create = %q (%v), want %q", name, err, want)
		}
	}
	_, _, err = create("   ", resources.SuffixTakenName)
	wantCode(t, err, codes.InvalidArgument, "name")
	if n := count(t, srv, `SELECT count(*) FROM agent_groups WHERE name LIKE 'helper%'`); n != 3 {
		t.Fatalf("%d helper groups, want 3", n)
	}
}
