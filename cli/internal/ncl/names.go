package ncl

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/cli/internal/render"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/holdview"
)

// names turns what a person types (a group's or user's name, or its id)
// into the id the server takes, and ids back into names for tables. Each
// list is read once per command, through the same List RPCs (and read
// scoping) as `ncl groups list` and `ncl users list`; a list the caller
// may not read leaves ids as they are.
type names struct {
	ctx context.Context
	c   *clients

	groups     map[string]*guardv1.Group // by id
	groupsRead bool
	groupsErr  error
	users      map[string]*guardv1.User // by id
	usersRead  bool
	usersErr   error
	// called: what the readable groups' destinations call the groups they
	// target, for a group the caller may not read (a scoped admin reads
	// "to ops", as the agent said it, not the target's id).
	called map[string]string
}

// maxCalledGroups bounds the destination lists read to name groups the
// caller may not read (a scoped admin has few groups; an owner reads all).
const maxCalledGroups = 20

func (n *names) readCalled() {
	if n.called != nil {
		return
	}
	n.called = map[string]string{}
	read := 0
	for id := range n.groups {
		if read++; read > maxCalledGroups {
			return
		}
		all, err := pages(n.ctx, n.c, 0, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
			resp, err := c.reg.ListDestinations(ctx, &guardv1.ListDestinationsRequest{Group: id, Limit: size, PageToken: token})
			return render.Msgs(resp.GetDestinations()), resp.GetNextPageToken(), err
		})
		if err != nil {
			continue
		}
		for _, m := range all {
			if d := m.(*guardv1.Destination); d.GetTargetGroup() != "" && n.called[d.GetTargetGroup()] == "" {
				n.called[d.GetTargetGroup()] = d.GetName()
			}
		}
	}
}

func newNames(ctx context.Context, c *clients) *names { return &names{ctx: ctx, c: c} }

func (n *names) readGroups() error {
	if !n.groupsRead {
		n.groupsRead = true
		all, err := pages(n.ctx, n.c, 0, listGroupsPage)
		n.groupsErr = err
		if n.groups == nil {
			n.groups = map[string]*guardv1.Group{}
		}
		for _, m := range all {
			g := m.(*guardv1.Group)
			n.groups[g.GetId()] = g
		}
	}
	return n.groupsErr
}

func (n *names) readUsers() error {
	if !n.usersRead {
		n.usersRead = true
		all, err := pages(n.ctx, n.c, 0, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
			resp, err := c.reg.ListUsers(ctx, &guardv1.ListUsersRequest{Limit: size, PageToken: token})
			return render.Msgs(resp.GetUsers()), resp.GetNextPageToken(), err
		})
		n.usersErr = err
		n.users = map[string]*guardv1.User{}
		for _, m := range all {
			u := m.(*guardv1.User)
			n.users[u.GetId()] = u
		}
	}
	return n.usersErr
}

// GroupName is the group's name, or what a readable group's destination
// calls it ("" when neither is known).
func (n *names) GroupName(id string) string {
	if g, ok := n.groups[id]; ok {
		return g.GetName()
	}
	if n.readGroups() != nil {
		return ""
	}
	if g, ok := n.groups[id]; ok {
		return g.GetName()
	}
	n.readCalled()
	return n.called[id]
}

// UserName is the user's display name ("" when none or not readable).
func (n *names) UserName(id string) string {
	_ = n.readUsers()
	return n.users[id].GetDisplayName()
}

// group resolves ref, a group's id or exact name, to the id. A ref that is
// neither is refused (NotFound, "no group named …"), and a name two groups
// share is refused naming their ids: a filter that matched nothing would
// print an empty answer that reads as "none".
func (n *names) group(ref string) (string, error) {
	if ref == "" {
		return "", nil
	}
	if _, ok := n.groups[ref]; ok {
		return ref, nil
	}
	resp, err := n.c.reg.GetGroup(n.ctx, &guardv1.GetGroupRequest{Id: ref})
	switch status.Code(err) {
	case codes.OK:
		if n.groups == nil {
			n.groups = map[string]*guardv1.Group{}
		}
		n.groups[ref] = resp.GetGroup()
		return ref, nil
	case codes.NotFound, codes.InvalidArgument:
	default:
		return "", err
	}
	if err := n.readGroups(); err != nil {
		return "", fmt.Errorf("group %q: not an id, and the groups could not be listed to find it by name: %w", ref, err)
	}
	var ids []string
	for id, g := range n.groups {
		if g.GetName() == ref {
			ids = append(ids, id)
		}
	}
	return oneOf("group", ref, ids)
}

// groupOrAsIs is the id of the readable group whose id or only name is
// ref, else ref unchanged.
func (n *names) groupOrAsIs(ref string) string {
	if err := n.readGroups(); err != nil {
		return ref
	}
	if _, ok := n.groups[ref]; ok {
		return ref
	}
	var ids []string
	for id, g := range n.groups {
		if g.GetName() == ref {
			ids = append(ids, id)
		}
	}
	if len(ids) == 1 {
		return ids[0]
	}
	return ref
}

// targetOrAsIs is groupOrAsIs, and else, for an agent of group from, the
// target group of its destination named ref (what its agents call it: a
// group admin reads their group's destinations, not always the target).
func (n *names) targetOrAsIs(ref, from string) string {
	if id := n.groupOrAsIs(ref); id != ref || from == "" {
		return id
	}
	if _, ok := n.groups[ref]; ok {
		return ref
	}
	all, err := pages(n.ctx, n.c, 0, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
		resp, err := c.reg.ListDestinations(ctx, &guardv1.ListDestinationsRequest{Group: from, Limit: size, PageToken: token})
		return render.Msgs(resp.GetDestinations()), resp.GetNextPageToken(), err
	})
	if err != nil {
		return ref
	}
	for _, m := range all {
		if d := m.(*guardv1.Destination); d.GetName() == ref && d.GetTargetGroup() != "" {
			return d.GetTargetGroup()
		}
	}
	return ref
}

// user resolves ref, a user id (<channel>:<handle>) or a display name, to
// the id. An id is taken as it is (a policy may name an approver before
// they sign up); a display name must be one user's.
func (n *names) user(ref string) (string, error) {
	if ref == "" || strings.Contains(ref, ":") {
		return ref, nil
	}
	if err := n.readUsers(); err != nil {
		return "", fmt.Errorf("user %q: not an id (<channel>:<handle>), and the users could not be listed to find it by name: %w", ref, err)
	}
	var exact, folded []string
	for id, u := range n.users {
		switch {
		case u.GetDisplayName() == ref:
			exact = append(exact, id)
		case strings.EqualFold(u.GetDisplayName(), ref):
			folded = append(folded, id)
		}
	}
	if len(exact) == 0 {
		exact = folded
	}
	id, err := oneOf("user", ref, exact)
	if status.Code(err) == codes.NotFound {
		return "", status.Errorf(codes.NotFound, "no user named %q (a user id is <channel>:<handle>, e.g. telegram:dana)", ref)
	}
	return id, err
}

// oneOf is the one id a name matched, or the refusal.
func oneOf(what, ref string, ids []string) (string, error) {
	switch len(ids) {
	case 1:
		return ids[0], nil
	case 0:
		return "", status.Errorf(codes.NotFound, "no %s named %q", what, ref)
	}
	sort.Strings(ids)
	return "", status.Errorf(codes.InvalidArgument, "%d %ss are named %q (%s): give the id", len(ids), what, ref, strings.Join(ids, ", "))
}

// groups resolves each *ref in place (group ids or names).
func (n *names) groupsIn(refs ...*string) error {
	for _, r := range refs {
		id, err := n.group(*r)
		if err != nil {
			return err
		}
		*r = id
	}
	return nil
}

// usersIn resolves each *ref in place (user ids or display names).
func (n *names) usersIn(refs ...*string) error {
	for _, r := range refs {
		id, err := n.user(*r)
		if err != nil {
			return err
		}
		*r = id
	}
	return nil
}

// MayBeGroup is holdview.GroupWords: a readable group's id, or a word
// shaped like a group id (named, if at all, by what a readable group's
// destination calls it).
func (n *names) MayBeGroup(w string) bool {
	if n.readGroups() == nil {
		if _, ok := n.groups[w]; ok {
			return true
		}
	}
	return holdview.LooksLikeGroupID(w)
}
