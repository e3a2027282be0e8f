package api_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// Issue 13: Approvals.List turned any limit above 1,000 into 100 with no
// paging. Every page honours its limit, a next_page_token walks the rest
// (same timestamps included: keyset on the sort keys), a limit past the
// maximum is InvalidArgument saying what is allowed, and a token is bound
// to the filters it was issued for. The decision log pages the same way.
func TestListsPageThroughEveryRow(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 250
	// Half the rows share one timestamp, so paging must break ties by id.
	if _, err := srv.Pool.Exec(ctx, `
		INSERT INTO holds (id, kind, created_at)
		SELECT 'ho_' || lpad(i::text, 4, '0'), 'onecli_credential', CASE WHEN i % 2 = 0 THEN '2026-11-30T06:00:00Z'::timestamptz ELSE now() - i * interval '1 second' END
		FROM generate_series(1, 250) AS i;
		INSERT INTO decisions (id, at, action, actor, actor_kind, effect)
		SELECT 'dec_' || lpad(i::text, 4, '0'), CASE WHEN i % 2 = 0 THEN '2026-11-30T06:00:00Z'::timestamptz ELSE now() - i * interval '1 second' END,
		       'paging.test', '{}', 'system', 'allow'
		FROM generate_series(1, 250) AS i`); err != nil {
		t.Fatal(err)
	}
	op := srv.Operator(t)

	seen := map[string]bool{}
	token, pages := "", 0
	for {
		res, err := op.Approvals.List(ctx, &guardv1.ListRequest{Kind: "onecli_credential", Limit: 100, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(res.GetHolds()) > 100 {
			t.Fatalf("page of %d holds, limit 100", len(res.GetHolds()))
		}
		for _, h := range res.GetHolds() {
			if seen[h.GetId()] {
				t.Fatalf("hold %s on two pages", h.GetId())
			}
			seen[h.GetId()] = true
		}
		if token = res.GetNextPageToken(); token == "" {
			break
		}
	}
	if len(seen) != n || pages != 3 {
		t.Fatalf("paged %d holds in %d pages, want %d in 3", len(seen), pages, n)
	}
	big, err := op.Approvals.List(ctx, &guardv1.ListRequest{Kind: "onecli_credential", Limit: 1000})
	if err != nil || len(big.GetHolds()) != n || big.GetNextPageToken() != "" {
		t.Fatalf("limit 1000: %d holds, next %q (%v), want all %d and no next page", len(big.GetHolds()), big.GetNextPageToken(), err, n)
	}
	if _, err := op.Approvals.List(ctx, &guardv1.ListRequest{Limit: 1001}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("limit 1001: %v, want InvalidArgument naming the maximum", err)
	}
	first, err := op.Approvals.List(ctx, &guardv1.ListRequest{Kind: "onecli_credential", Limit: 10})
	if err != nil || first.GetNextPageToken() == "" {
		t.Fatalf("first page: %v", err)
	}
	if _, err := op.Approvals.List(ctx, &guardv1.ListRequest{Kind: "cli_command", PageToken: first.GetNextPageToken()}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a token used with other filters: %v, want InvalidArgument", err)
	}

	seen, token = map[string]bool{}, ""
	for {
		res, err := op.Registry.ListDecisions(ctx, &guardv1.ListDecisionsRequest{Action: "paging.test", Limit: 70, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range res.GetDecisions() {
			if seen[d.GetId()] {
				t.Fatalf("decision %s on two pages", d.GetId())
			}
			seen[d.GetId()] = true
		}
		if token = res.GetNextPageToken(); token == "" {
			break
		}
	}
	if len(seen) != n {
		t.Fatalf("paged %d decisions, want %d", len(seen), n)
	}
	if _, err := op.Registry.ListDecisions(ctx, &guardv1.ListDecisionsRequest{Limit: 5000}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("decisions limit 5000: %v, want InvalidArgument", err)
	}

	if _, err := srv.Pool.Exec(ctx, `INSERT INTO agent_groups (id, name) VALUES ('ag_paging', 'paging');
		INSERT INTO sessions (id, agent_group_id, created_at)
		SELECT 'se_' || lpad(i::text, 4, '0'), 'ag_paging', now() - (i % 3) * interval '1 second' FROM generate_series(1, 250) AS i`); err != nil {
		t.Fatal(err)
	}
	seen, token = map[string]bool{}, ""
	for {
		res, err := op.Registry.ListSessions(ctx, &guardv1.ListSessionsRequest{Group: "ag_paging", Limit: 99, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range res.GetSessions() {
			if seen[x.GetId()] {
				t.Fatalf("session %s on two pages", x.GetId())
			}
			seen[x.GetId()] = true
		}
		if token = res.GetNextPageToken(); token == "" {
			break
		}
	}
	if len(seen) != n {
		t.Fatalf("paged %d sessions, want %d", len(seen), n)
	}
}
