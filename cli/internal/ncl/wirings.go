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

func (a *app) wiringsCmd() *cobra.Command {
	var lgroup, lmg string
	var listLimit int32
	list := &cobra.Command{
		Use: "list", Short: "List which messaging groups reach which agent groups", Example: "  ncl wirings list --group research", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.groupArgs(&lgroup)
			return a.listPages(cmd, &guardv1.Wiring{}, listLimit, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
				resp, err := c.reg.ListWirings(ctx, &guardv1.ListWiringsRequest{Group: lgroup, MessagingGroup: lmg, Limit: size, PageToken: token})
				return render.Msgs(resp.GetWirings()), resp.GetNextPageToken(), err
			})
		},
	}
	limitFlag(list, &listLimit)
	list.Flags().StringVar(&lgroup, "group", "", "only wirings to this agent group")
	list.Flags().StringVar(&lmg, "messaging-group", "", "only wirings from this messaging group")
	var cgroup, cmg string
	create := &cobra.Command{
		Use: "create", Short: "Wire a messaging group (a chat) to an agent group",
		Example: "  ncl wirings create --messaging-group mg_5d0c8e2f1a9b3c47 --group research", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.groupArgs(&cgroup)
			return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
				resp, err := c.reg.CreateWiring(ctx, &guardv1.CreateWiringRequest{MessagingGroup: cmg, Group: cgroup})
				return resp.GetWiring(), err
			})
		},
	}
	create.Flags().StringVar(&cgroup, "group", "", "agent group")
	create.Flags().StringVar(&cmg, "messaging-group", "", "messaging group")
	required(create, "group", "messaging-group")
	del := &cobra.Command{
		Use: "delete <id>", Short: "Delete a wiring", Example: "  ncl wirings delete wi_123", Args: one("id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.done(cmd, "deleted wiring "+args[0], func(ctx context.Context, c *clients) error {
				_, err := c.reg.DeleteWiring(ctx, &guardv1.DeleteWiringRequest{Id: args[0]})
				return err
			})
		},
	}
	return noun("wirings", "Chats wired to agent groups", "  ncl wirings create --messaging-group mg_5d0c8e2f1a9b3c47 --group research", list, create, del)
}

// wiringViews are how a wiring prints.
var wiringViews = []render.View{
	render.For[*guardv1.Wiring](render.View{
		Cols: []render.Col{
			render.C("ID", (*guardv1.Wiring).GetId),
			render.C("MESSAGING GROUP", (*guardv1.Wiring).GetMessagingGroup),
			render.CX("GROUP", func(w *guardv1.Wiring, e render.Env) string { return e.Group(w.GetGroup()) }),
			render.Wide(render.C("GROUP ID", (*guardv1.Wiring).GetGroup)),
			render.C("CREATED", func(w *guardv1.Wiring) string { return render.Time(w.GetCreatedAt()) }),
		},
		ID: render.IDOf((*guardv1.Wiring).GetId),
	}),
}

// Wirings in the document: a chat wired to an agent group (the chat's
// messages reach it), made last, once the chats and groups exist, and
// deleted first.

var wiringsState = &statePart{read: readWirings, plan: planWirings, check: checkWirings, sort: sortWirings}

// A chat wired to an agent group: the chat's messages reach the group.
type wiringSpec struct {
	Chat  string `yaml:"chat"`
	Group string `yaml:"group"`
	id    string // the server's id, for deletion (read, never written)
}

func (w wiringSpec) key() string { return w.Chat + " → " + w.Group }

// readWirings reads every wiring.
func readWirings(ctx context.Context, c *clients, s *state, book groupBook) error {
	wirings, err := listAll(ctx, c, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
		r, err := c.reg.ListWirings(ctx, &guardv1.ListWiringsRequest{Limit: size, PageToken: token})
		return msgs(r.GetWirings()), r.GetNextPageToken(), err
	})
	if err != nil {
		return fmt.Errorf("read wirings: %w", err)
	}
	for _, m := range wirings {
		w := m.(*guardv1.Wiring)
		s.Wirings = append(s.Wirings, wiringSpec{Chat: book.chatKey(w.GetMessagingGroup()), Group: book.nameOf(w.GetGroup()), id: w.GetId()})
	}
	return nil
}

func planWirings(cur, want *state) (p planned) {
	// Wirings: last, once their chats and groups exist; deleted first.
	for _, w := range want.Wirings {
		if slices.ContainsFunc(cur.Wirings, func(o wiringSpec) bool { return o.key() == w.key() }) {
			continue
		}
		p.changes = append(p.changes, change{'+', "wiring " + w.key(), func(ctx context.Context, c *clients, book groupBook) error {
			_, err := c.reg.CreateWiring(ctx, &guardv1.CreateWiringRequest{MessagingGroup: book.chatID(w.Chat), Group: idOr(book, w.Group)})
			return err
		}})
	}
	for _, w := range cur.Wirings {
		if !slices.ContainsFunc(want.Wirings, func(o wiringSpec) bool { return o.key() == w.key() }) {
			p.dels = append(p.dels, change{'-', "wiring " + w.key(), func(ctx context.Context, c *clients, _ groupBook) error {
				_, err := c.reg.DeleteWiring(ctx, &guardv1.DeleteWiringRequest{Id: w.id})
				return err
			}})
		}
	}

	return p
}

func checkWirings(s *state, once func(kind, key string) error) (err error) {
	for _, w := range s.Wirings {
		if w.Chat == "" || w.Group == "" {
			err = firstErr(err, fmt.Errorf("wiring %q: chat and group are required", w.key()))
		}
		err = firstErr(err, once("wiring", w.Chat+"/"+w.Group))
	}
	return err
}

func sortWirings(s *state) {
	slices.SortFunc(s.Wirings, func(a, b wiringSpec) int { return strings.Compare(a.key(), b.key()) })
}
