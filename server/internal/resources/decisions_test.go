package resources_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Issue 32: the log's default view is what changed something or was
// refused; reads (a page view, a list, a dry run) come on request. Filters
// by actor and by a time window.
func TestDecisionLogLeavesReadsOutUnlessAsked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, c := start(t)
	r := c.Registry
	exec(t, srv, `INSERT INTO decisions (id, at, action, actor, actor_kind, effect, reason, dry_run) VALUES
		('mut', now() - interval '50 minutes', 'groups.create', '{"human": {"user_id": "telegram:dana"}}', 'human', 'allow', 'ok', false),
		('read', now() - interval '40 minutes', 'groups.list', '{"human": {"user_id": "telegram:dana"}}', 'human', 'allow', 'ok', false),
		('probe', now() - interval '30 minutes', 'groups.list', '{"human": {"user_id": "telegram:eve"}}', 'human', 'deny', 'not yours', false),
		('whatif', now() - interval '20 minutes', 'a2a.send', '{"human": {"user_id": "telegram:dana"}}', 'human', 'hold', 'what if', true),
		('hostcall', now() - interval '10 minutes', 'groups.delete', NULL, 'host', 'allow', 'ok', false)`)
	ids := func(req *guardv1.ListDecisionsRequest) []string {
		out := []string{}
		for _, d := range must[*guardv1.ListDecisionsResponse](t)(r.ListDecisions(ctx, req)).GetDecisions() {
			if slices.Contains([]string{"mut", "read", "probe", "whatif", "hostcall"}, d.GetId()) {
				out = append(out, d.GetId())
			}
		}
		return out
	}
	hourAgo := timestamppb.New(time.Now().Add(-time.Hour))
	for name, tc := range map[string]struct {
		req  *guardv1.ListDecisionsRequest
		want []string
	}{
		// A denied read is a probe, not a page view: it stays.
		"by default":            {&guardv1.ListDecisionsRequest{Since: hourAgo}, []string{"hostcall", "probe", "mut"}},
		"with reads":            {&guardv1.ListDecisionsRequest{Since: hourAgo, IncludeReads: true}, []string{"hostcall", "whatif", "probe", "read", "mut"}},
		"one user":              {&guardv1.ListDecisionsRequest{Actor: "telegram:dana", IncludeReads: true}, []string{"whatif", "read", "mut"}},
		"one user's changes":    {&guardv1.ListDecisionsRequest{Actor: "telegram:dana"}, []string{"mut"}},
		"the host":              {&guardv1.ListDecisionsRequest{Actor: "host", Since: hourAgo}, []string{"hostcall"}},
		"a window":              {&guardv1.ListDecisionsRequest{Since: hourAgo, Until: timestamppb.New(time.Now().Add(-25 * time.Minute)), IncludeReads: true}, []string{"probe", "read", "mut"}},
		"a window and an actor": {&guardv1.ListDecisionsRequest{Actor: "telegram:eve", Until: timestamppb.New(time.Now().Add(-35 * time.Minute))}, []string{}},
	} {
		if got := ids(tc.req); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", name, got, tc.want)
		}
	}
	for _, bad := range []*guardv1.ListDecisionsRequest{
		{Actor: "dana"},
		{Since: timestamppb.New(time.Now()), Until: hourAgo},
	} {
		_, err := r.ListDecisions(ctx, bad)
		wantCode(t, err, codes.InvalidArgument, "")
	}
}
