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

func (a *app) destinationsCmd() *cobra.Command {
	var lgroup string
	var listLimit int32
	list := &cobra.Command{
		Use: "list", Short: "List where groups may send messages", Example: "  ncl destinations list --group research", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.groupArgs(&lgroup)
			return a.listPages(cmd, &guardv1.Destination{}, listLimit, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
				resp, err := c.reg.ListDestinations(ctx, &guardv1.ListDestinationsRequest{Group: lgroup, Limit: size, PageToken: token})
				return render.Msgs(resp.GetDestinations()), resp.GetNextPageToken(), err
			})
		},
	}
	limitFlag(list, &listLimit)
	list.Flags().StringVar(&lgroup, "group", "", "only destinations of this group")
	var req guardv1.AddDestinationRequest
	add := &cobra.Command{
		Use: "add", Short: "Let a group message another group (or a messaging group) by name",
		Long: `Add a named destination to a group. Without a destination an agent's
a2a.send to another group is denied; with one it is allowed, or held for the
approver of a message policy on the pair (see: ncl policies set).`,
		Example: "  ncl destinations add --group research --name ops --target-group ops", Args: none,
	}
	add.Flags().StringVar(&req.Group, "group", "", "the sending group")
	add.Flags().StringVar(&req.Name, "name", "", "name the sending agents use")
	add.Flags().StringVar(&req.TargetGroup, "target-group", "", "receiving agent group")
	add.Flags().StringVar(&req.TargetMessagingGroup, "target-messaging-group", "", "receiving messaging group (instead of --target-group)")
	required(add, "group", "name")
	add.MarkFlagsOneRequired("target-group", "target-messaging-group")
	add.MarkFlagsMutuallyExclusive("target-group", "target-messaging-group")
	add.RunE = func(cmd *cobra.Command, _ []string) error {
		a.groupArgs(&req.Group, &req.TargetGroup)
		return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
			resp, err := c.reg.AddDestination(ctx, &req)
			return resp.GetDestination(), err
		})
	}
	var rgroup, rname string
	remove := &cobra.Command{
		Use: "remove", Short: "Remove a destination", Example: "  ncl destinations remove --group research --name ops", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.groupArgs(&rgroup)
			name := rgroup
			return a.done(cmd, fmt.Sprintf("removed destination %s of group %s", rname, name), func(ctx context.Context, c *clients) error {
				_, err := c.reg.RemoveDestination(ctx, &guardv1.RemoveDestinationRequest{Group: rgroup, Name: rname})
				return err
			})
		},
	}
	remove.Flags().StringVar(&rgroup, "group", "", "the sending group")
	remove.Flags().StringVar(&rname, "name", "", "destination name")
	required(remove, "group", "name")
	return noun("destinations", "Named message destinations of groups (agent-to-agent wiring)",
		"  ncl destinations add --group research --name ops --target-group ops", list, add, remove)
}

// destinationViews are how a destination prints.
var destinationViews = []render.View{
	render.For[*guardv1.Destination](render.View{
		Cols: []render.Col{
			render.CX("GROUP", func(d *guardv1.Destination, e render.Env) string { return e.Group(d.GetGroup()) }),
			render.Wide(render.C("GROUP ID", (*guardv1.Destination).GetGroup)),
			render.C("NAME", (*guardv1.Destination).GetName),
			render.CX("TARGET", func(d *guardv1.Destination, e render.Env) string {
				if d.GetTargetMessagingGroup() != "" {
					return "messaging-group " + d.GetTargetMessagingGroup()
				}
				return "group " + e.Group(d.GetTargetGroup())
			}),
			render.Wide(render.C("TARGET ID", func(d *guardv1.Destination) string { return d.GetTargetGroup() + d.GetTargetMessagingGroup() })),
		},
		ID: render.IDOf((*guardv1.Destination).GetName),
	}),
}

// Destinations in the document: what a group's agents call another group
// (target) or a chat (chat, a messaging group's key), by name.

var destinationsState = &statePart{read: readDestinations, plan: planDestinations, check: checkDestinations, sort: sortDestinations}

// A destination of a group: what its agents call another group (target)
// or a chat (chat, a messaging group's key: channelType/platformId).
type destinationSpec struct {
	Group  string `yaml:"group"`
	Name   string `yaml:"name"`
	Target string `yaml:"target,omitempty"`
	Chat   string `yaml:"chat,omitempty"`
}

func (d destinationSpec) key() string { return d.Group + "/" + d.Name }
func (d destinationSpec) to() string {
	if d.Chat != "" {
		return "chat " + d.Chat
	}
	return d.Target
}

// readDestinations reads each group's destinations.
func readDestinations(ctx context.Context, c *clients, s *state, book groupBook) error {
	for _, g := range s.Groups {
		dests, err := listAll(ctx, c, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
			r, err := c.reg.ListDestinations(ctx, &guardv1.ListDestinationsRequest{Group: book.id[g.Name], Limit: size, PageToken: token})
			return msgs(r.GetDestinations()), r.GetNextPageToken(), err
		})
		if err != nil {
			return fmt.Errorf("read destinations of %s: %w", g.Name, err)
		}
		for _, m := range dests {
			d := m.(*guardv1.Destination)
			spec := destinationSpec{Group: g.Name, Name: d.GetName()}
			if d.GetTargetGroup() != "" {
				spec.Target = book.nameOf(d.GetTargetGroup())
			} else {
				spec.Chat = book.chatKey(d.GetTargetMessagingGroup())
			}
			s.Destinations = append(s.Destinations, spec)
		}
	}
	return nil
}

func planDestinations(cur, want *state) (p planned) {
	// Destinations: a changed target is a removal and an addition.
	dests := map[string]destinationSpec{}
	for _, d := range cur.Destinations {
		dests[d.key()] = d
	}
	for _, d := range want.Destinations {
		old, ok := dests[d.key()]
		if ok && old.Target == d.Target && old.Chat == d.Chat {
			continue
		}
		op, what := byte('+'), "destination "+d.key()+" → "+d.to()
		if ok {
			op, what = '~', fmt.Sprintf("destination %s: target %s → %s", d.key(), old.to(), d.to())
		}
		p.changes = append(p.changes, change{op, what, func(ctx context.Context, c *clients, book groupBook) error {
			if ok {
				if _, err := c.reg.RemoveDestination(ctx, &guardv1.RemoveDestinationRequest{Group: idOr(book, d.Group), Name: d.Name}); err != nil {
					return err
				}
			}
			req := &guardv1.AddDestinationRequest{Group: idOr(book, d.Group), Name: d.Name}
			if d.Chat != "" {
				req.TargetMessagingGroup = book.chatID(d.Chat)
			} else {
				req.TargetGroup = idOr(book, d.Target)
			}
			_, err := c.reg.AddDestination(ctx, req)
			return err
		}})
	}
	for _, d := range cur.Destinations {
		if !slices.ContainsFunc(want.Destinations, func(w destinationSpec) bool { return w.key() == d.key() }) {
			p.dels = append(p.dels, change{'-', "destination " + d.key(), func(ctx context.Context, c *clients, book groupBook) error {
				_, err := c.reg.RemoveDestination(ctx, &guardv1.RemoveDestinationRequest{Group: idOr(book, d.Group), Name: d.Name})
				return err
			}})
		}
	}

	return p
}

func checkDestinations(s *state, once func(kind, key string) error) (err error) {
	for _, d := range s.Destinations {
		err = firstErr(err, once("destination", d.key()))
	}
	for _, d := range s.Destinations {
		if (d.Target == "") == (d.Chat == "") {
			err = firstErr(err, fmt.Errorf("destination %s: exactly one of target and chat", d.key()))
		}
	}
	return err
}

func sortDestinations(s *state) {
	slices.SortFunc(s.Destinations, func(a, b destinationSpec) int { return strings.Compare(a.key(), b.key()) })
}
