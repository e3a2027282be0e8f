package ncl

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/cli/internal/render"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

func (a *app) membersCmd() *cobra.Command {
	var lgroup string
	var listLimit int32
	list := &cobra.Command{
		Use: "list", Short: "List members of a group", Example: "  ncl members list --group research", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.groupArgs(&lgroup)
			return a.listPages(cmd, &guardv1.Member{}, listLimit, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
				resp, err := c.reg.ListMembers(ctx, &guardv1.ListMembersRequest{Group: lgroup, Limit: size, PageToken: token})
				return render.Msgs(resp.GetMembers()), resp.GetNextPageToken(), err
			})
		},
	}
	limitFlag(list, &listLimit)
	list.Flags().StringVar(&lgroup, "group", "", "the agent group")
	var agroup, auser string
	add := &cobra.Command{
		Use: "add", Short: "Add a user to a group", Example: "  ncl members add --group research --user telegram:alice", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.groupArgs(&agroup)
			a.userArgs(&auser)
			return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
				resp, err := c.reg.AddMember(ctx, &guardv1.AddMemberRequest{Group: agroup, UserId: auser})
				return resp.GetMember(), err
			})
		},
	}
	add.Flags().StringVar(&agroup, "group", "", "the agent group")
	add.Flags().StringVar(&auser, "user", "", "user id (<channel>:<handle>)")
	required(add, "group", "user")
	var rgroup, ruser string
	remove := &cobra.Command{
		Use: "remove", Short: "Remove a user from a group", Example: "  ncl members remove --group research --user telegram:alice", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.groupArgs(&rgroup)
			a.userArgs(&ruser)
			user, group := ruser, rgroup
			return a.done(cmd, fmt.Sprintf("removed %s from group %s", user, group), func(ctx context.Context, c *clients) error {
				_, err := c.reg.RemoveMember(ctx, &guardv1.RemoveMemberRequest{Group: rgroup, UserId: ruser})
				return err
			})
		},
	}
	remove.Flags().StringVar(&rgroup, "group", "", "the agent group")
	remove.Flags().StringVar(&ruser, "user", "", "user id")
	required(remove, "group", "user")
	return noun("members", "Users who belong to an agent group", "  ncl members add --group research --user telegram:alice", list, add, remove)
}

// memberViews are how a group member prints.
var memberViews = []render.View{
	render.For[*guardv1.Member](render.View{
		Cols: []render.Col{
			render.CX("GROUP", func(m *guardv1.Member, e render.Env) string { return e.Group(m.GetGroup()) }),
			render.Wide(render.C("GROUP ID", (*guardv1.Member).GetGroup)),
			render.C("USER", (*guardv1.Member).GetUserId),
			render.CX("NAME", func(m *guardv1.Member, e render.Env) string { return e.UserName(m.GetUserId()) }),
			render.C("ADDED", func(m *guardv1.Member) string { return render.Time(m.GetAddedAt()) }),
		},
		ID: render.IDOf((*guardv1.Member).GetUserId),
	}),
}

// Group members in the document: a user who is a member of a group.

var membersState = &statePart{read: readMembers, plan: planMembers, check: checkMembers, sort: sortMembers}

// A user who is a member of a group.
type memberSpec struct {
	Group string `yaml:"group"`
	User  string `yaml:"user"`
}

func (m memberSpec) key() string { return m.User + " in " + m.Group }

// readMembers reads each group's members.
func readMembers(ctx context.Context, c *clients, s *state, book groupBook) error {
	for _, g := range s.Groups {
		members, err := listAll(ctx, c, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
			r, err := c.reg.ListMembers(ctx, &guardv1.ListMembersRequest{Group: book.id[g.Name], Limit: size, PageToken: token})
			return msgs(r.GetMembers()), r.GetNextPageToken(), err
		})
		if err != nil {
			return fmt.Errorf("read members of %s: %w", g.Name, err)
		}
		for _, m := range members {
			s.Members = append(s.Members, memberSpec{Group: g.Name, User: m.(*guardv1.Member).GetUserId()})
		}
	}
	return nil
}

func planMembers(cur, want *state) (p planned) {
	// Members.
	for _, m := range want.Members {
		if slices.ContainsFunc(cur.Members, func(o memberSpec) bool { return o == m }) {
			continue
		}
		p.changes = append(p.changes, change{'+', "member " + m.key(), func(ctx context.Context, c *clients, book groupBook) error {
			_, err := c.reg.AddMember(ctx, &guardv1.AddMemberRequest{Group: idOr(book, m.Group), UserId: m.User})
			return err
		}})
	}
	for _, m := range cur.Members {
		if !slices.Contains(want.Members, m) {
			p.dels = append(p.dels, change{'-', "member " + m.key(), func(ctx context.Context, c *clients, book groupBook) error {
				_, err := c.reg.RemoveMember(ctx, &guardv1.RemoveMemberRequest{Group: idOr(book, m.Group), UserId: m.User})
				return err
			}})
		}
	}

	return p
}

func checkMembers(s *state, once func(kind, key string) error) (err error) {
	for _, m := range s.Members {
		err = firstErr(err, once("member", m.Group+"/"+m.User))
	}
	return err
}

func sortMembers(s *state) {
	slices.SortFunc(s.Members, func(a, b memberSpec) int { return strings.Compare(a.key(), b.key()) })
}
