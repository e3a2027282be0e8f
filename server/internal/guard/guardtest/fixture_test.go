package guardtest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/clawguard/clawguard/migrations/pgtest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// world is one case's isolated corner of a shared database: groups {A} and
// {B} with sessions {SA} and {SB} on runner {R}. Case SQL names them with
// those placeholders, so cases share one server and never see each other.
type world struct {
	t      *testing.T
	srv    *testserver.Server
	repl   *strings.Replacer
	A, B   string
	SA, SB string
	R      string
}

var worldSeq atomic.Int64

func newWorld(t *testing.T, srv *testserver.Server) *world {
	t.Helper()
	n := worldSeq.Add(1)
	w := &world{t: t, srv: srv,
		A: fmt.Sprintf("ga%d", n), B: fmt.Sprintf("gb%d", n),
		SA: fmt.Sprintf("sa%d", n), SB: fmt.Sprintf("sb%d", n), R: fmt.Sprintf("r%d", n)}
	w.repl = strings.NewReplacer("{A}", w.A, "{B}", w.B, "{SA}", w.SA, "{SB}", w.SB, "{R}", w.R)
	w.exec(`INSERT INTO agent_groups (id, name) VALUES ('{A}', '{A}'), ('{B}', '{B}');
		INSERT INTO runners (id) VALUES ('{R}');
		INSERT INTO sessions (id, agent_group_id, runner_id) VALUES ('{SA}', '{A}', '{R}'), ('{SB}', '{B}', '{R}')`)
	return w
}

// sub replaces the placeholders.
func (w *world) sub(s string) string { return w.repl.Replace(s) }

func (w *world) exec(sql string) {
	w.t.Helper()
	if sql == "" {
		return
	}
	pgtest.Exec(w.t, w.srv.Pool, w.sub(sql))
}

func (w *world) count(sql string) int {
	w.t.Helper()
	var n int
	if err := w.srv.Pool.QueryRow(context.Background(), w.sub(sql)).Scan(&n); err != nil {
		w.t.Fatalf("count: %v\n%s", err, w.sub(sql))
	}
	return n
}

// actor parses "host", "system", "human:<user>", "agent:{A}" or "agent:{A}:{SA}".
func (w *world) actor(s string) *guardv1.Actor {
	s = w.sub(s)
	switch {
	case s == "host":
		return &guardv1.Actor{Kind: &guardv1.Actor_Host{Host: &guardv1.HostActor{}}}
	case s == "system":
		return &guardv1.Actor{Kind: &guardv1.Actor_System{System: &guardv1.SystemActor{}}}
	case strings.HasPrefix(s, "human:"):
		return &guardv1.Actor{Kind: &guardv1.Actor_Human{Human: &guardv1.HumanActor{UserId: strings.TrimPrefix(s, "human:")}}}
	case strings.HasPrefix(s, "agent:"):
		group, session, _ := strings.Cut(strings.TrimPrefix(s, "agent:"), ":")
		return &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: group, SessionId: session}}}
	}
	w.t.Fatalf("bad actor %q", s)
	return nil
}

// subAny replaces placeholders in every string of a JSON-shaped value.
func (w *world) subAny(v any) any {
	switch x := v.(type) {
	case string:
		return w.sub(x)
	case map[string]any:
		out := map[string]any{}
		for k, v := range x {
			out[k] = w.subAny(v)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, v := range x {
			out[i] = w.subAny(v)
		}
		return out
	}
	return v
}

func (w *world) payload(m map[string]any) *structpb.Struct {
	w.t.Helper()
	if m == nil {
		return nil
	}
	st, err := structpb.NewStruct(w.subAny(m).(map[string]any))
	if err != nil {
		w.t.Fatal(err)
	}
	return st
}

func (w *world) resource(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = w.sub(v)
	}
	return out
}

// approvedHold is SQL for a hold row in a given state, for grant cases.
func approvedHold(id, kind, status, payloadJSON string, consumed bool) string {
	resolved := "now()"
	if status == "pending" {
		resolved = "NULL"
	}
	consumedAt := "NULL"
	if consumed {
		consumedAt = "now()"
	}
	return fmt.Sprintf(`INSERT INTO holds (id, kind, payload, session_id, agent_group_id, status, resolved_at, consumed_at)
		VALUES ('%s', '%s', '%s'::jsonb, '{SA}', '{A}', '%s', %s, %s);`, id, kind, payloadJSON, status, resolved, consumedAt)
}
