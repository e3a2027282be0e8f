package ncl

import (
	"context"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/cli/internal/render"
	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

func (a *app) sessionsCmd() *cobra.Command {
	var group, runner string
	var listLimit int32
	list := &cobra.Command{
		Use: "list", Short: "List sessions", Example: "  ncl sessions list --group research", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.groupArgs(&group)
			return a.listPages(cmd, &guardv1.Session{}, listLimit, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
				resp, err := c.reg.ListSessions(ctx, &guardv1.ListSessionsRequest{Group: group, RunnerId: runner, Limit: size, PageToken: token})
				return render.Msgs(resp.GetSessions()), resp.GetNextPageToken(), err
			})
		},
	}
	limitFlag(list, &listLimit)
	list.Flags().StringVar(&group, "group", "", "only sessions of this agent group")
	list.Flags().StringVar(&runner, "runner", "", "only sessions on this runner")
	get := &cobra.Command{
		Use: "get <id>", Short: "Show one session", Example: "  ncl sessions get se_123", Args: one("id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
				resp, err := c.reg.GetSession(ctx, &guardv1.GetSessionRequest{Id: args[0]})
				return resp.GetSession(), err
			})
		},
	}
	var limit int32
	history := &cobra.Command{
		Use: "history <id>", Short: "Show a session's message history", Example: "  ncl sessions history se_123 --limit 20", Args: one("id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.list(cmd, &guardv1.SessionEvent{}, func(ctx context.Context, c *clients) ([]proto.Message, error) {
				resp, err := c.reg.GetSessionHistory(ctx, &guardv1.GetSessionHistoryRequest{Id: args[0], Limit: limit})
				return render.Msgs(resp.GetEvents()), err
			})
		},
	}
	history.Flags().Int32Var(&limit, "limit", 50, "at most this many events")
	return noun("sessions", "Agent sessions", "  ncl sessions list\n  ncl sessions history se_123", list, get, history)
}

// sessionViews are how a session and its history print.
var sessionViews = []render.View{
	render.For[*guardv1.Session](render.View{
		Cols: []render.Col{
			render.C("ID", (*guardv1.Session).GetId),
			render.CX("GROUP", func(x *guardv1.Session, e render.Env) string { return e.Group(x.GetAgentGroupId()) }),
			render.Wide(render.C("GROUP ID", (*guardv1.Session).GetAgentGroupId)),
			render.C("MESSAGING GROUP", (*guardv1.Session).GetMessagingGroupId),
			render.C("RUNNER", (*guardv1.Session).GetRunnerId),
			render.C("STATUS", func(s *guardv1.Session) string { return enumword.String(s.GetStatus()) }),
			render.C("LAST ACTIVE", func(s *guardv1.Session) string { return render.Time(s.GetLastActiveAt()) }),
		},
		Detail: []render.Col{render.C("CREATED", func(s *guardv1.Session) string { return render.Time(s.GetCreatedAt()) })},
		ID:     render.IDOf((*guardv1.Session).GetId),
	}),
	render.For[*guardv1.SessionEvent](render.View{
		Cols: []render.Col{
			render.C("ID", func(e *guardv1.SessionEvent) string { return render.Num(e.GetId()) }),
			render.C("AT", func(e *guardv1.SessionEvent) string { return render.Time(e.GetAt()) }),
			render.C("DIRECTION", (*guardv1.SessionEvent).GetDirection),
			render.C("KIND", (*guardv1.SessionEvent).GetKind),
			render.C("BODY", func(e *guardv1.SessionEvent) string { return render.Truncate(render.StructJSON(e.GetBody()), 80) }),
		},
		ID: render.IDOf(func(e *guardv1.SessionEvent) string { return render.Num(e.GetId()) }),
	}),
}
