package ncl

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/cli/internal/render"
	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// ncl catalog: the guarded actions the server knows, and each one's
// enforcement mode, quorum, step-up and escalation; in the document the
// settings of the actions not at their defaults.

func (a *app) catalogCmd() *cobra.Command {
	var catalogLimit int32
	list := &cobra.Command{
		Use: "list", Short: "List the guarded actions the server knows", Example: "  ncl catalog list\n  ncl catalog list -o json | jq -r '.[].action'", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if catalogLimit < 0 {
				return usagef("--limit: must not be negative")
			}
			return a.do(cmd, func(ctx context.Context, c *clients) error {
				var exempt []string
				entries, err := pages(ctx, c, catalogLimit, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
					resp, err := c.reg.ListCatalog(ctx, &guardv1.ListCatalogRequest{Limit: size, PageToken: token})
					exempt = resp.GetExemptDeliveryActions()
					return render.Msgs(resp.GetEntries()), resp.GetNextPageToken(), err
				})
				if err != nil {
					return err
				}
				p := a.printer()
				if err := p.List(&guardv1.CatalogEntry{}, entries); err != nil {
					return err
				}
				if !p.JSON && !p.Quiet && len(exempt) > 0 {
					fmt.Fprintf(a.stdout, "\nexempt delivery actions: %s\n", strings.Join(exempt, ", "))
				}
				return nil
			})
		},
	}
	limitFlag(list, &catalogLimit)
	set := a.catalogSet()
	return noun("catalog", "The catalog of guarded actions", "  ncl catalog list\n  ncl catalog set --action a2a.send --mode audit", list, set)
}

// catalogSet sets a catalog action's mode, quorum, step-up and escalation.
func (a *app) catalogSet() *cobra.Command {
	var (
		action, mode string
		approvals    int32
		stepUp       bool
		esc          escalationFlags
	)
	set := &cobra.Command{
		Use:   "set",
		Short: "Set a catalog action's enforcement mode, quorum, step-up and escalation",
		Long: `Set how a catalog action's gates act and how many approvals its holds need.

--mode enforce (default): holds hold and gate denials deny.
--mode audit: the action runs; the decision log records what enforce would
  have answered (ncl decisions list shows it; the would-hold and would-deny
  rates are on the dashboard).
--mode warn: runs as audit, and the agent and its group's admins are told.
Protections of the system itself (global-scope holds, D1-D4, conformance,
grants) are always enforced.

--approvals N: every hold of the action needs N distinct eligible approvers
(each click checked as usual; one reject rejects). 0 = the approver scope's
default (clawguard-server --global-hold-approvals / --group-hold-approvals).

--step-up: a tap in chat cannot approve its holds; the approver approves in
the console after signing in again (within 10 minutes), or with their own
token (ncl). Global-scope admin commands always need it.

` + escalationHelp + `

Each set replaces all of the action's settings.`,
		Example: "  ncl catalog set --action a2a.send --mode audit\n  ncl catalog set --action self_mod.install_packages --approvals 2\n  ncl catalog set --action self_mod.add_mcp_server --step-up\n  ncl catalog set --action self_mod.install_packages --remind-after 10m --escalate-after 30m --escalate-to telegram:erin --escalate-to group:ops",
		Args:    none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := parseMode(mode)
			if err != nil {
				return err
			}
			return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
				remind, escalate := esc.durations()
				resp, err := c.reg.SetActionSettings(ctx, &guardv1.SetActionSettingsRequest{Action: action, Approvals: approvals, Mode: m, StepUp: stepUp,
					RemindAfter: remind, EscalateAfter: escalate, EscalateTo: esc.to})
				c.warned(resp)
				return resp.GetEntry(), err
			})
		},
	}
	set.Flags().StringVar(&action, "action", "", "catalog action (ncl catalog list)")
	set.Flags().StringVar(&mode, "mode", "enforce", "enforce, audit or warn")
	set.Flags().Int32Var(&approvals, "approvals", 0, "distinct approvals its holds need (0 = scope default)")
	set.Flags().BoolVar(&stepUp, "step-up", false, "a tap in chat cannot approve its holds: a fresh console sign-in or the approver's own token")
	esc.add(set.Flags())
	required(set, "action")
	return set
}

// catalogViews are how a catalog entry prints.
var catalogViews = []render.View{
	render.For[*guardv1.CatalogEntry](render.View{
		Cols: []render.Col{
			render.C("ACTION", (*guardv1.CatalogEntry).GetAction),
			render.C("ACCESS", func(e *guardv1.CatalogEntry) string { return enumword.String(e.GetAccess()) }),
			render.C("APPROVAL ACTION", (*guardv1.CatalogEntry).GetApprovalAction),
			render.C("RESOURCE", (*guardv1.CatalogEntry).GetResource),
			render.C("MODE", func(e *guardv1.CatalogEntry) string { return render.ModeWord(e.GetMode(), "enforce") }),
			render.C("APPROVALS", func(e *guardv1.CatalogEntry) string {
				if e.GetApprovals() == 0 {
					return "default"
				}
				return fmt.Sprint(e.GetApprovals())
			}),
			render.C("STEP-UP", func(e *guardv1.CatalogEntry) string { return render.YesNo(e.GetStepUp()) }),
			render.CX("ESCALATION", func(c *guardv1.CatalogEntry, e render.Env) string {
				return e.Escalation(c.GetRemindAfter(), c.GetEscalateAfter(), c.GetEscalateTo())
			}),
			render.C("DESCRIPTION", (*guardv1.CatalogEntry).GetDescription),
		},
		ID: render.IDOf((*guardv1.CatalogEntry).GetAction),
	}),
}

var catalogState = &statePart{read: readCatalog, plan: planCatalog, check: checkCatalog, sort: sortCatalog}

// An operator setting of a catalog action (actions at their defaults are
// not listed).
type actionSpec struct {
	Action    string `yaml:"action"`
	Approvals int32  `yaml:"approvals,omitempty"`
	Mode      string `yaml:"mode,omitempty"`
	StepUp    bool   `yaml:"stepUp,omitempty"`
	// Escalation (user ids, group:<name>).
	EscalationSpec `yaml:",inline"`
}

// readCatalog reads the settings of every catalog action not at its defaults.
func readCatalog(ctx context.Context, c *clients, s *state, book groupBook) error {
	catalog, err := listAll(ctx, c, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
		r, err := c.reg.ListCatalog(ctx, &guardv1.ListCatalogRequest{Limit: size, PageToken: token})
		return msgs(r.GetEntries()), r.GetNextPageToken(), err
	})
	if err != nil {
		return fmt.Errorf("read catalog: %w", err)
	}
	for _, m := range catalog {
		e := m.(*guardv1.CatalogEntry)
		mode := enumword.String(e.GetMode())
		if mode == "enforce" {
			mode = ""
		}
		esc := escalationOf(e.GetRemindAfter(), e.GetEscalateAfter(), e.GetEscalateTo(), book)
		if e.GetApprovals() != 0 || mode != "" || e.GetStepUp() || !esc.equal(EscalationSpec{}) {
			s.Catalog = append(s.Catalog, actionSpec{Action: e.GetAction(), Approvals: e.GetApprovals(), Mode: mode, StepUp: e.GetStepUp(), EscalationSpec: esc})
		}
	}
	return nil
}

func planCatalog(cur, want *state) (p planned) {
	// Catalog settings; "deleting" one is setting it back to the defaults.
	actions := map[string]actionSpec{}
	for _, a := range cur.Catalog {
		actions[a.Action] = a
	}
	setAction := func(a actionSpec) func(ctx context.Context, c *clients, _ groupBook) error {
		return func(ctx context.Context, c *clients, _ groupBook) error {
			mode, err := parseMode(a.Mode)
			if err != nil {
				return fmt.Errorf("catalog %s: %w", a.Action, err)
			}
			remind, escalate, to, err := a.EscalationSpec.request()
			if err != nil {
				return fmt.Errorf("catalog %s: %w", a.Action, err)
			}
			resp, err := c.reg.SetActionSettings(ctx, &guardv1.SetActionSettingsRequest{Action: a.Action, Approvals: a.Approvals, Mode: mode, StepUp: a.StepUp,
				RemindAfter: remind, EscalateAfter: escalate, EscalateTo: to})
			c.warned(resp)
			return err
		}
	}
	for _, a := range want.Catalog {
		old, ok := actions[a.Action]
		if ok && old.Approvals == a.Approvals && old.Mode == a.Mode && old.StepUp == a.StepUp && old.EscalationSpec.equal(a.EscalationSpec) {
			continue
		}
		op, what := byte('+'), fmt.Sprintf("catalog %s: approvals %d, mode %s, step-up %v%s", a.Action, a.Approvals, orEnforce(a.Mode), a.StepUp, a.EscalationSpec.words())
		if ok {
			op, what = '~', fmt.Sprintf("catalog %s: approvals %d → %d, mode %s → %s, step-up %v → %v%s", a.Action, old.Approvals, a.Approvals, orEnforce(old.Mode), orEnforce(a.Mode), old.StepUp, a.StepUp, a.EscalationSpec.words())
		}
		p.changes = append(p.changes, change{op, what, setAction(a)})
	}
	for _, a := range cur.Catalog {
		if _, ok := actions[a.Action]; ok && !slices.ContainsFunc(want.Catalog, func(w actionSpec) bool { return w.Action == a.Action }) {
			p.dels = append(p.dels, change{'-', "catalog " + a.Action + " settings (back to the defaults)", setAction(actionSpec{Action: a.Action})})
		}
	}

	return p
}

func orEnforce(mode string) string {
	if mode == "" {
		return "enforce"
	}
	return mode
}

func checkCatalog(s *state, once func(kind, key string) error) (err error) {
	for _, a := range s.Catalog {
		err = firstErr(err, once("catalog action", a.Action))
	}
	return err
}

func sortCatalog(s *state) {
	slices.SortFunc(s.Catalog, func(a, b actionSpec) int { return strings.Compare(a.Action, b.Action) })
}
