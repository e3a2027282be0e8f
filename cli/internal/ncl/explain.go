package ncl

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/clawguard/clawguard/cli/internal/render"
	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/holdview"
)

func (a *app) explainCmd() *cobra.Command {
	var action, actor, payload string
	var resources []string
	cmd := &cobra.Command{
		Use:   "explain",
		Short: "Ask the guard what it would decide, without doing anything",
		Long: `Evaluate one action as a dry run (Guard.Decide with dry_run): no hold is
created and no grant consumed. Prints the effect (allow, hold, deny), the
reason, for a hold the approver rule and scope, which check decided, and
the explanation in words (the checks, the facts they read, what would change
the answer) — the same one the console and 'ncl decisions get' show.

--actor is host, agent:<group>[:<session>] or human:<user> (user ids contain
a colon themselves: human:telegram:dana). The group and the user may be
given by name (agent:research, human:Dana), and so may the target group of
a2a.send (--resource to=ops).`,
		Example: `  ncl explain --action a2a.send --actor agent:research --resource to=ops
  ncl explain --action roles.grant --actor human:telegram:alice --payload '{"group":"research"}' -o json`,
		Args: none,
	}
	cmd.Flags().StringVar(&action, "action", "", "catalog action, e.g. a2a.send (see: ncl catalog list)")
	cmd.Flags().StringVar(&actor, "actor", "", "host, agent:<group>[:<session>] or human:<user>")
	cmd.Flags().StringArrayVar(&resources, "resource", nil, "resource reference key=value (repeatable), e.g. to=<group>")
	cmd.Flags().StringVar(&payload, "payload", "", "action arguments as a JSON object")
	required(cmd, "action", "actor")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		act, err := parseActor(actor)
		if err != nil {
			return err
		}
		res, err := kvPairs("resource", resources)
		if err != nil {
			return err
		}
		req := &guardv1.DecideRequest{Action: action, Actor: act, Resource: res, DryRun: true}
		if payload != "" {
			if req.Payload, err = parsePayload(payload); err != nil {
				return err
			}
		}
		// The actor's group or user by name or id (an admin asks about
		// their own group's agents: it is one they may read).
		switch k := act.GetKind().(type) {
		case *guardv1.Actor_Agent:
			a.groupArgs(&k.Agent.AgentGroupId)
		case *guardv1.Actor_Human:
			a.userArgs(&k.Human.UserId)
		}
		return a.do(cmd, func(ctx context.Context, c *clients) error {
			// A resource naming a group may name it: a name of a group the
			// caller reads, or of a destination of the actor's group, becomes
			// the group's id; anything else is asked as given (the guard
			// answers for groups the caller does not read too).
			for _, k := range holdview.GroupResourceKeys[action] {
				if v, ok := req.Resource[k]; ok {
					req.Resource[k] = a.names.targetOrAsIs(v, req.GetActor().GetAgent().GetAgentGroupId())
				}
			}
			resp, err := c.guard.Decide(ctx, req)
			if err != nil {
				return err
			}
			if resp.GetDecision().GetDecidedBy() == decidedByNonCatalog {
				// The guard lets actions outside its catalog through unchecked;
				// for a what-if question that is almost always a typo.
				return unknownAction(ctx, c, action)
			}
			return a.printer().Explained(resp.GetDecision(), resp.GetExplanation())
		})
	}
	return cmd
}

// parseActor reads host | agent:<group>[:<session>] | human:<user>.
func parseActor(s string) (*guardv1.Actor, error) {
	kind, rest, _ := strings.Cut(s, ":")
	switch kind {
	case "host":
		if rest != "" {
			return nil, usagef("--actor host takes nothing after it")
		}
		return &guardv1.Actor{Kind: &guardv1.Actor_Host{Host: &guardv1.HostActor{}}}, nil
	case "agent":
		group, session, _ := strings.Cut(rest, ":")
		if group == "" {
			return nil, usagef("--actor agent:<group>[:<session>] needs a group")
		}
		return &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: group, SessionId: session}}}, nil
	case "human":
		if rest == "" {
			return nil, usagef("--actor human:<user> needs a user, e.g. human:telegram:dana")
		}
		return &guardv1.Actor{Kind: &guardv1.Actor_Human{Human: &guardv1.HumanActor{UserId: rest}}}, nil
	}
	return nil, usagef("--actor %q: want host, agent:<group>[:<session>] or human:<user>", s)
}

func parsePayload(s string) (*structpb.Struct, error) {
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, usagef("--payload is not a JSON object: %v", err)
	}
	st, err := structpb.NewStruct(m)
	if err != nil {
		return nil, usagef("--payload: %v", err)
	}
	return st, nil
}

// decidedByNonCatalog is the decided_by of an action outside the catalog.
const decidedByNonCatalog = "non-catalog"

// unknownAction is the usage error for an action the catalog does not have,
// naming the closest catalog actions.
func unknownAction(ctx context.Context, c *clients, action string) error {
	var near []string
	entries, err := pages(ctx, c, 0, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
		resp, err := c.reg.ListCatalog(ctx, &guardv1.ListCatalogRequest{Limit: size, PageToken: token})
		return render.Msgs(resp.GetEntries()), resp.GetNextPageToken(), err
	})
	if err == nil {
		prefix, _, _ := strings.Cut(action, ".")
		for _, m := range entries {
			if e := m.(*guardv1.CatalogEntry); strings.HasPrefix(e.GetAction(), prefix+".") || strings.Contains(e.GetAction(), action) {
				near = append(near, e.GetAction())
			}
		}
	}
	hint := "see: ncl catalog list"
	if len(near) > 0 {
		hint = "did you mean " + strings.Join(near, ", ") + "? (ncl catalog list)"
	}
	return usagef("unknown action %q: not in the guard's catalog, so a real call would be allowed unchecked (non-catalog); %s", action, hint)
}

// explainViews are how a decision prints (ncl explain; its explanation
// follows it in words: render.Explanation).
var explainViews = []render.View{
	render.For[*guardv1.Decision](render.View{
		Cols: []render.Col{
			render.C("EFFECT", func(d *guardv1.Decision) string { return enumword.String(d.GetEffect()) }),
			render.CX("REASON", func(d *guardv1.Decision, e render.Env) string { return holdview.Words(e.Names, d.GetReason()) }),
			render.CX("APPROVER RULE", func(d *guardv1.Decision, e render.Env) string { return render.RuleNamed(d.GetApproverRule(), e.Names) }),
			render.C("APPROVER SCOPE", func(d *guardv1.Decision) string { return enumword.String(d.GetApproverScope()) }),
			render.C("DECIDED BY", (*guardv1.Decision).GetDecidedBy),
		},
		// A gate in audit or warn mode: what it answered, and what enforce would.
		Detail: []render.Col{
			render.C("MODE", (*guardv1.Decision).GetMode),
			render.CX("ENFORCE WOULD", func(d *guardv1.Decision, e render.Env) string {
				if d.GetMode() == "" {
					return ""
				}
				return enumword.String(d.GetWouldEffect()) + ": " + holdview.Words(e.Names, d.GetWouldReason())
			}),
		},
		ID: render.IDOf(func(d *guardv1.Decision) string { return enumword.String(d.GetEffect()) }),
	}),
}
