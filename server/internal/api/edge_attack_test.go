package api_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/api"
	"github.com/clawguard/clawguard/server/internal/store"
	"github.com/clawguard/clawguard/server/internal/testserver"
	"github.com/jackc/pgx/v5"
)

// A NUL byte in a name reached Postgres, whose refusal came back as
// Unavailable (clients retry that forever) carrying the database's text;
// a 200 KB name was stored. Both are InvalidArgument naming the field, and
// nothing is written.
func TestBadTextIsInvalidArgumentAndNothingIsWritten(t *testing.T) {
	srv := testserver.Start(t)
	ctx := context.Background()
	op := srv.Operator(t)
	for _, c := range []struct {
		name, value, want string
	}{
		{"NUL byte", "re\x00search", "name: must not contain a NUL byte"},
		{"200 KB", strings.Repeat("a", 200<<10), "name: must be at most 256 characters"},
	} {
		_, err := op.Registry.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: c.value})
		st := status.Convert(err)
		if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), c.want) {
			t.Errorf("%s group name: %v, want InvalidArgument %q", c.name, err, c.want)
		}
		if strings.Contains(st.Message(), "SQLSTATE") || strings.Contains(st.Message(), "\x00") {
			t.Errorf("%s group name: the answer carries database text or the NUL itself: %q", c.name, st.Message())
		}
	}
	// Ids, users and chat text are bounded the same way, for every principal.
	bridge := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "bridge", "", ""), ""))
	_, err := bridge.Registry.RouteInbound(ctx, &guardv1.RouteInboundRequest{ChannelType: "telegram", PlatformId: "chat-1",
		SenderUserId: "tg:eve", MessageId: "m1", Text: "hi\x00"})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "text: must not contain a NUL byte") {
		t.Errorf("NUL in chat text: %v, want InvalidArgument naming text", err)
	}
	_, err = op.Registry.GrantRole(ctx, &guardv1.GrantRoleRequest{UserId: "tg:\x00mallory", Role: guardv1.Role_ROLE_OWNER})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "user_id") {
		t.Errorf("NUL in a user id: %v, want InvalidArgument naming user_id", err)
	}
	_, err = op.Registry.GrantRole(ctx, &guardv1.GrantRoleRequest{UserId: "tg:mallory", Role: guardv1.Role(99)})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "role") {
		t.Errorf("undefined role: %v, want InvalidArgument naming role", err)
	}
	for table, q := range map[string]string{
		"agent_groups": `SELECT count(*) FROM agent_groups`, "users": `SELECT count(*) FROM users WHERE id LIKE 'tg:%'`,
		"user_roles": `SELECT count(*) FROM user_roles WHERE user_id LIKE 'tg:%'`, "messaging_groups": `SELECT count(*) FROM messaging_groups`,
	} {
		var n int
		if err := srv.Pool.QueryRow(ctx, q).Scan(&n); err != nil || n != 0 {
			t.Errorf("refused requests wrote %d %s rows (%v)", n, table, err)
		}
	}
}

// One bad frame on DecideStream turned the other decisions batched with it
// into "guard failure" denies. A frame is validated on its own and answered
// on its own; its neighbours are decided on their merits, and the stream
// goes on.
func TestBadDecideStreamFrameCostsOnlyItsOwnAnswer(t *testing.T) {
	srv := testserver.Start(t)
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO agent_groups (id, name) VALUES ('g1', 'g1')`,
		`INSERT INTO runners (id, host, lease_expires_at) VALUES ('r1', 'h', now() + interval '1 hour')`,
		`INSERT INTO sessions (id, agent_group_id, runner_id) VALUES ('s1', 'g1', 'r1')`,
	} {
		if _, err := srv.Pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	runner := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "runner", "r1", ""), "s1"))
	stream, err := runner.Guard.DecideStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bad, _ := structpb.NewStruct(map[string]any{"text": "hi\x00"})
	const n = 60
	for i := range n {
		req := &guardv1.DecideRequest{Action: "a2a.send", Resource: map[string]string{"to": "g1"}}
		switch i % 20 {
		case 7:
			req.Payload = bad
		case 13:
			req.Resource["to"] = "g1\x00"
		}
		if err := stream.Send(&guardv1.DecideStreamRequest{CorrelationId: fmt.Sprintf("c%d", i), Request: req}); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		r, err := stream.Recv()
		if err != nil {
			t.Fatalf("stream ended: %v", err)
		}
		var i int
		fmt.Sscanf(r.GetCorrelationId(), "c%d", &i)
		switch i % 20 {
		case 7, 13:
			if r.GetError().GetCode() != int32(codes.InvalidArgument) || !strings.Contains(r.GetError().GetMessage(), "NUL byte") {
				t.Errorf("%s: %v, want a per-frame InvalidArgument about the NUL byte", r.GetCorrelationId(), r)
			}
		default:
			if d := r.GetResponse().GetDecision(); r.GetError() != nil || d.GetEffect() != guardv1.Effect_EFFECT_ALLOW {
				t.Errorf("%s: %v, want allow (self-send) — a neighbour's bad frame decided it", r.GetCorrelationId(), r)
			}
		}
	}
	// The stream survived its bad frames.
	if err := stream.Send(&guardv1.DecideStreamRequest{CorrelationId: "after", Request: &guardv1.DecideRequest{Action: "a2a.send", Resource: map[string]string{"to": "g1"}}}); err != nil {
		t.Fatal(err)
	}
	if r, err := stream.Recv(); err != nil || r.GetResponse().GetDecision().GetEffect() != guardv1.Effect_EFFECT_ALLOW {
		t.Fatalf("frame after the bad ones: %v (%v)", r, err)
	}
	_ = stream.CloseSend()
	var denies int
	if err := srv.Pool.QueryRow(ctx, `SELECT count(*) FROM decisions WHERE effect <> 'allow'`).Scan(&denies); err != nil || denies != 0 {
		t.Fatalf("%d logged non-allow decisions (%v), want 0: bad frames must not reach the guard", denies, err)
	}
}

// Database refusals are classified where the SQL ran (store.Fault) by what
// they mean, in the server's words, and mapped at the edge (api.Status): a
// value Postgres cannot hold is the caller's fault (InvalidArgument, not
// retried), only a database that cannot serve is Unavailable, and the
// database's own text never reaches the client.
func TestDatabaseFaultsSpeakOurWords(t *testing.T) {
	srv := testserver.Start(t)
	ctx := context.Background()
	for _, c := range []struct {
		sql  string
		args []any
		want codes.Code
	}{
		{`SELECT $1::text`, []any{"a\x00b"}, codes.InvalidArgument},     // 22021
		{`SELECT $1::int`, []any{"x"}, codes.InvalidArgument},           // 22P02
		{`SELECT '{"a": "\u0000"}'::jsonb`, nil, codes.InvalidArgument}, // 22P05
		{`INSERT INTO agent_groups (id, name) VALUES ('g', repeat('x', 1))`, nil, codes.OK},
		{`INSERT INTO agent_groups (id, name) VALUES ('g', 'again')`, nil, codes.AlreadyExists},
		{`SELECT 1/0`, nil, codes.InvalidArgument},           // 22012
		{`SELECT * FROM no_such_table`, nil, codes.Internal}, // 42P01: our bug, not retryable
		// Issue 29: a database that cannot serve now is Unavailable (with a
		// retry hint, below), whatever Postgres called it: these were
		// Internal, and a click answered Internal was lost.
		{raise("53100"), nil, codes.Unavailable}, // disk full
		{raise("53300"), nil, codes.Unavailable}, // too many connections
		{raise("57P01"), nil, codes.Unavailable}, // admin shutdown (pg_ctl stop -m fast)
		{raise("57P03"), nil, codes.Unavailable}, // cannot connect now (starting up)
		{raise("25006"), nil, codes.Unavailable}, // read-only transaction (a demoted primary)
		{raise("58030"), nil, codes.Unavailable}, // I/O error
		{raise("40001"), nil, codes.Aborted},     // serialization failure
	} {
		_, err := srv.Pool.Exec(ctx, c.sql, c.args...)
		got := api.Status(store.Fault("thing", err))
		if status.Code(got) != c.want {
			t.Errorf("%s: %v → %v, want %v", c.sql, err, got, c.want)
		}
		if got != nil && (strings.Contains(got.Error(), "SQLSTATE") || strings.Contains(got.Error(), "invalid input") ||
			strings.Contains(got.Error(), "no_such_table") || strings.Contains(got.Error(), "raised")) {
			t.Errorf("%s: database text reached the client: %v", c.sql, got)
		}
		if status.Code(got) == codes.Unavailable && api.RetryDelay(status.Convert(got)) <= 0 {
			t.Errorf("%s: Unavailable without a RetryInfo hint: %v", c.sql, got)
		}
	}
	srv.Pool.Close()
	_, err := srv.Pool.Exec(ctx, `SELECT 1`)
	if got := api.Status(store.Fault("thing", err)); status.Code(got) != codes.Unavailable || api.RetryDelay(status.Convert(got)) <= 0 {
		t.Errorf("closed pool: %v → %v, want Unavailable with a hint", err, got)
	}
	// A database that cannot serve is Unavailable at the edge even when no
	// code below classified it.
	if got := api.Status(fmt.Errorf("read something: %w", err)); status.Code(got) != codes.Unavailable || api.RetryDelay(status.Convert(got)) <= 0 {
		t.Errorf("unclassified closed pool: %v → %v, want Unavailable with a hint", err, got)
	}
	// Not a database error at all: Internal, not a reason to retry.
	if got := api.Status(errors.New("encode result: boom")); status.Code(got) != codes.Internal || strings.Contains(got.Error(), "boom") {
		t.Errorf("plain error → %v, want Internal in our words", got)
	}
	// A missing row is NotFound only where the query that missed it says
	// what it was: one that reaches the edge unclassified is a bug, not
	// "not found" of whatever the handler was about.
	if got := api.Status(fmt.Errorf("look up a row: %w", pgx.ErrNoRows)); status.Code(got) != codes.Internal {
		t.Errorf("unclassified no-rows → %v, want Internal", got)
	}
	if got := api.Status(store.Fault("group", pgx.ErrNoRows)); status.Code(got) != codes.NotFound || status.Convert(got).Message() != "group not found" {
		t.Errorf("a missing group → %v, want NotFound \"group not found\"", got)
	}
}

// raise is a statement that makes Postgres itself answer with SQLSTATE code.
func raise(code string) string {
	return `DO $$ BEGIN RAISE EXCEPTION 'raised ` + code + `' USING ERRCODE = '` + code + `'; END $$`
}
