package api_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// listPage is one call of a List RPC: the ids of its page and the next token.
type listPage func(ctx context.Context, limit int32, token string) (ids []string, next string, err error)

// pageThrough reads every page of list at limit and returns the ids with
// prefix it saw, failing on a page over the limit or a row on two pages.
func pageThrough(ctx context.Context, t *testing.T, name string, limit int32, prefix string, list listPage) (map[string]bool, int) {
	t.Helper()
	seen := map[string]bool{}
	token, pages := "", 0
	for {
		ids, next, err := list(ctx, limit, token)
		if err != nil {
			t.Fatalf("%s page %d: %v", name, pages+1, err)
		}
		pages++
		if len(ids) > int(limit) {
			t.Fatalf("%s: page of %d, limit %d", name, len(ids), limit)
		}
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("%s: %s on two pages", name, id)
			}
			if strings.HasPrefix(id, prefix) {
				seen[id] = true
			}
		}
		if token = next; token == "" {
			return seen, pages
		}
		if pages > 100 {
			t.Fatalf("%s: still a next page after %d pages", name, pages)
		}
	}
}

// checkPaging asserts list pages through all n seeded rows (ids with
// prefix), refuses a limit past the maximum, and refuses the token of
// another list (or other filters) passed as other.
func checkPaging(ctx context.Context, t *testing.T, name string, n int, prefix string, list, other listPage) {
	t.Helper()
	seen, pages := pageThrough(ctx, t, name, 70, prefix, list)
	if len(seen) != n || pages < (n+69)/70 {
		t.Fatalf("%s: paged %d of the %d seeded rows in %d pages", name, len(seen), n, pages)
	}
	if _, _, err := list(ctx, 1001, ""); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "1..1000") {
		t.Fatalf("%s limit 1001: %v, want InvalidArgument naming 1..1000", name, err)
	}
	if _, _, err := list(ctx, -1, ""); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("%s limit -1: %v, want InvalidArgument", name, err)
	}
	_, next, err := list(ctx, 10, "")
	if err != nil || next == "" {
		t.Fatalf("%s first page of 10: next %q, %v", name, next, err)
	}
	if _, _, err := other(ctx, 10, next); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("%s token replayed on another query: %v, want InvalidArgument", name, err)
	}
}

func ids[T interface{ GetId() string }](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = x.GetId()
	}
	return out
}

// Issue 13: the registry's List RPCs returned every row in one response,
// with no limit and no way to page. Each now pages like ListSessions.
func TestRegistryListsPage(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 230
	// Names collide on purpose only where the keyset breaks ties by id.
	if _, err := srv.Pool.Exec(ctx, `
		INSERT INTO agent_groups (id, name) SELECT 'ag_pg' || lpad(i::text, 4, '0'), 'pg-' || lpad((1000 - i)::text, 4, '0') FROM generate_series(1, 230) AS i;
		INSERT INTO runners (id) SELECT 'rn_pg' || lpad(i::text, 4, '0') FROM generate_series(1, 230) AS i;
		INSERT INTO tokens (id, kind, hash, created_at)
		SELECT 'tok_pg' || lpad(i::text, 4, '0'), 'operator', sha256(i::text::bytea), '2026-11-30T06:00:00Z'::timestamptz + (i % 3) * interval '1 second'
		FROM generate_series(1, 230) AS i`); err != nil {
		t.Fatal(err)
	}
	reg := srv.Operator(t).Registry

	groups := func(ctx context.Context, limit int32, token string) ([]string, string, error) {
		r, err := reg.ListGroups(ctx, &guardv1.ListGroupsRequest{Limit: limit, PageToken: token})
		return ids(r.GetGroups()), r.GetNextPageToken(), err
	}
	tokens := func(ctx context.Context, limit int32, token string) ([]string, string, error) {
		r, err := reg.ListTokens(ctx, &guardv1.ListTokensRequest{Limit: limit, PageToken: token})
		return ids(r.GetTokens()), r.GetNextPageToken(), err
	}
	runners := func(ctx context.Context, limit int32, token string) ([]string, string, error) {
		r, err := reg.ListRunners(ctx, &guardv1.ListRunnersRequest{Limit: limit, PageToken: token})
		return ids(r.GetRunners()), r.GetNextPageToken(), err
	}
	checkPaging(ctx, t, "ListGroups", n, "ag_pg", groups, runners)
	checkPaging(ctx, t, "ListTokens", n, "tok_pg", tokens, groups)
	checkPaging(ctx, t, "ListRunners", n, "rn_pg", runners, groups)
}

// Issue 13: users, role grants and members page like the rest.
func TestPeopleListsPage(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 230
	// Every user an admin of one group, every other one a global owner too:
	// the role keyset crosses global (NULL group) and scoped grants.
	if _, err := srv.Pool.Exec(ctx, `
		INSERT INTO agent_groups (id, name) VALUES ('ag_people', 'people');
		INSERT INTO users (id) SELECT 'pg:u' || lpad(i::text, 4, '0') FROM generate_series(1, 230) AS i;
		INSERT INTO agent_group_members (agent_group_id, user_id) SELECT 'ag_people', 'pg:u' || lpad(i::text, 4, '0') FROM generate_series(1, 230) AS i;
		INSERT INTO user_roles (user_id, role, agent_group_id) SELECT 'pg:u' || lpad(i::text, 4, '0'), 'admin', 'ag_people' FROM generate_series(1, 230) AS i;
		INSERT INTO user_roles (user_id, role) SELECT 'pg:u' || lpad(i::text, 4, '0'), 'owner' FROM generate_series(2, 230, 2) AS i`); err != nil {
		t.Fatal(err)
	}
	reg := srv.Operator(t).Registry

	users := func(ctx context.Context, limit int32, token string) ([]string, string, error) {
		r, err := reg.ListUsers(ctx, &guardv1.ListUsersRequest{Limit: limit, PageToken: token})
		return ids(r.GetUsers()), r.GetNextPageToken(), err
	}
	members := func(ctx context.Context, limit int32, token string) ([]string, string, error) {
		r, err := reg.ListMembers(ctx, &guardv1.ListMembersRequest{Group: "ag_people", Limit: limit, PageToken: token})
		var out []string
		for _, m := range r.GetMembers() {
			out = append(out, m.GetUserId())
		}
		return out, r.GetNextPageToken(), err
	}
	roles := func(group string) listPage {
		return func(ctx context.Context, limit int32, token string) ([]string, string, error) {
			r, err := reg.ListRoles(ctx, &guardv1.ListRolesRequest{Group: group, Limit: limit, PageToken: token})
			var out []string
			for _, g := range r.GetRoles() {
				out = append(out, g.GetUserId()+"/"+g.GetRole().String()+"/"+g.GetGroup())
			}
			return out, r.GetNextPageToken(), err
		}
	}
	checkPaging(ctx, t, "ListUsers", n, "pg:", users, members)
	checkPaging(ctx, t, "ListMembers", n, "pg:", members, users)
	checkPaging(ctx, t, "ListRoles", n+n/2, "pg:", roles(""), roles("ag_people"))
	checkPaging(ctx, t, "ListRoles of a group", n, "pg:", roles("ag_people"), roles(""))
}

// Issue 13: destinations, message policies and wirings page like the rest.
func TestRoutingListsPage(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 230
	// Policies cross from-group boundaries; wirings share created_at in threes.
	if _, err := srv.Pool.Exec(ctx, `
		INSERT INTO agent_groups (id, name) SELECT 'ag_rt' || lpad(i::text, 4, '0'), 'rt-' || i FROM generate_series(1, 230) AS i;
		INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) SELECT 'ag_rt0001', 'dest-' || lpad(i::text, 4, '0'), 'ag_rt' || lpad(i::text, 4, '0') FROM generate_series(1, 230) AS i;
		INSERT INTO agent_message_policies (from_agent_group_id, to_agent_group_id, approver_user_id)
		SELECT 'ag_rt' || lpad((1 + i % 3)::text, 4, '0'), 'ag_rt' || lpad(i::text, 4, '0'), 'pg:olga' FROM generate_series(1, 230) AS i;
		INSERT INTO messaging_groups (id, channel_type, platform_id) SELECT 'mg_rt' || lpad(i::text, 4, '0'), 'pg', 'chat' || i FROM generate_series(1, 230) AS i;
		INSERT INTO messaging_group_agents (id, messaging_group_id, agent_group_id, created_at)
		SELECT 'wr_rt' || lpad(i::text, 4, '0'), 'mg_rt' || lpad(i::text, 4, '0'), 'ag_rt0002', '2026-11-30T06:00:00Z'::timestamptz + (i / 3) * interval '1 second' FROM generate_series(1, 230) AS i`); err != nil {
		t.Fatal(err)
	}
	reg := srv.Operator(t).Registry

	destinations := func(group string) listPage {
		return func(ctx context.Context, limit int32, token string) ([]string, string, error) {
			r, err := reg.ListDestinations(ctx, &guardv1.ListDestinationsRequest{Group: group, Limit: limit, PageToken: token})
			var out []string
			for _, d := range r.GetDestinations() {
				out = append(out, d.GetName())
			}
			return out, r.GetNextPageToken(), err
		}
	}
	policies := func(group string) listPage {
		return func(ctx context.Context, limit int32, token string) ([]string, string, error) {
			r, err := reg.ListPolicies(ctx, &guardv1.ListPoliciesRequest{Group: group, Limit: limit, PageToken: token})
			var out []string
			for _, p := range r.GetPolicies() {
				out = append(out, p.GetFromGroup()+">"+p.GetToGroup())
			}
			return out, r.GetNextPageToken(), err
		}
	}
	wirings := func(group string) listPage {
		return func(ctx context.Context, limit int32, token string) ([]string, string, error) {
			r, err := reg.ListWirings(ctx, &guardv1.ListWiringsRequest{Group: group, Limit: limit, PageToken: token})
			return ids(r.GetWirings()), r.GetNextPageToken(), err
		}
	}
	checkPaging(ctx, t, "ListDestinations", n, "dest-", destinations("ag_rt0001"), destinations("ag_rt0002"))
	checkPaging(ctx, t, "ListPolicies", n, "ag_rt", policies(""), policies("ag_rt0001"))
	checkPaging(ctx, t, "ListWirings", n, "wr_rt", wirings("ag_rt0002"), wirings(""))
}

// Issue 13: chats, DM addresses and the (in-memory) catalog page too.
func TestChatListsAndCatalogPage(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 230
	// Chats cross channel types; users have two DM channels each.
	if _, err := srv.Pool.Exec(ctx, `
		INSERT INTO messaging_groups (id, channel_type, platform_id) SELECT 'mg_pg' || lpad(i::text, 4, '0'), 'pg' || (i % 3), 'chat' || i FROM generate_series(1, 230) AS i;
		INSERT INTO users (id) SELECT 'pg:u' || lpad(i::text, 4, '0') FROM generate_series(1, 115) AS i;
		INSERT INTO user_dms (user_id, channel_type, address) SELECT 'pg:u' || lpad(i::text, 4, '0'), c, 'addr' || i FROM generate_series(1, 115) AS i, (VALUES ('pga'), ('pgb')) AS t(c)`); err != nil {
		t.Fatal(err)
	}
	reg := srv.Operator(t).Registry

	chats := func(ctx context.Context, limit int32, token string) ([]string, string, error) {
		r, err := reg.ListMessagingGroups(ctx, &guardv1.ListMessagingGroupsRequest{Limit: limit, PageToken: token})
		return ids(r.GetMessagingGroups()), r.GetNextPageToken(), err
	}
	dms := func(user string) listPage {
		return func(ctx context.Context, limit int32, token string) ([]string, string, error) {
			r, err := reg.ListUserDms(ctx, &guardv1.ListUserDmsRequest{UserId: user, Limit: limit, PageToken: token})
			var out []string
			for _, d := range r.GetDms() {
				out = append(out, d.GetUserId()+"/"+d.GetChannelType())
			}
			return out, r.GetNextPageToken(), err
		}
	}
	catalog := func(ctx context.Context, limit int32, token string) ([]string, string, error) {
		r, err := reg.ListCatalog(ctx, &guardv1.ListCatalogRequest{Limit: limit, PageToken: token})
		var out []string
		for _, e := range r.GetEntries() {
			out = append(out, e.GetAction())
		}
		return out, r.GetNextPageToken(), err
	}
	checkPaging(ctx, t, "ListMessagingGroups", n, "mg_pg", chats, dms(""))
	checkPaging(ctx, t, "ListUserDms", n, "pg:", dms(""), dms("pg:u0001"))

	// The catalog is the server's, not seeded: every entry once across
	// pages of 5, the same entries as one page of 1000.
	whole, next, err := catalog(ctx, 1000, "")
	if err != nil || next != "" || len(whole) <= 10 {
		t.Fatalf("catalog in one page: %d entries, next %q, %v", len(whole), next, err)
	}
	seen, pages := pageThrough(ctx, t, "ListCatalog", 5, "", catalog)
	if len(seen) != len(whole) || pages != (len(whole)+4)/5 {
		t.Fatalf("catalog paged %d entries in %d pages, want %d", len(seen), pages, len(whole))
	}
	if _, _, err := catalog(ctx, 1001, ""); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("catalog limit 1001: %v, want InvalidArgument", err)
	}
	if _, next, _ := catalog(ctx, 5, ""); next == "" {
		t.Fatal("catalog page of 5 has no next page")
	} else if _, _, err := chats(ctx, 5, next); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a catalog token on ListMessagingGroups: %v, want InvalidArgument", err)
	}
}
