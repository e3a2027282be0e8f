package ncl

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/clawguard/clawguard/cli/internal/render"
)

// A kind is one resource ncl administers, in a file of its own: its
// commands, how its messages print (their views) and its part of the state
// document (what export reads and apply makes true). The kinds are listed
// here, the way the server's BuildCatalog lists catalog entries: adding a
// resource adds its file and a line below (and, when it is in the
// document, its field of state).
type kind struct {
	// command is the kind's top-level command; nil when its commands hang
	// under another kind's (a group's config under ncl groups).
	command func(a *app) *cobra.Command
	// views are how its messages print (tables, objects, ids).
	views []render.View
	// state is its part of the document; nil when it has none.
	state *statePart
}

// statePart is a kind's part of the document.
type statePart struct {
	// read adds what the server holds now to s; book knows the groups and
	// chats of every kind read before this one.
	read func(ctx context.Context, c *clients, s *state, book groupBook) error
	// plan is what makes cur's part what want's says.
	plan func(cur, want *state) planned
	// check refuses a part that names one thing twice (once says so) or
	// misses what it needs; sort puts the part in a stable order.
	check func(s *state, once func(kind, key string) error) error
	sort  func(s *state)
}

// kinds are every resource. Those in the document come first, in the order
// export reads them and apply makes their changes: what a group, a chat or
// a provider names comes after it (deletions run the other way round).
func kinds() []kind {
	return []kind{
		{command: (*app).usersCmd, views: userViews, state: usersState},
		{command: (*app).modelsCmd, views: modelProviderViews, state: modelProvidersState},
		{command: (*app).groupsCmd, views: groupViews, state: groupsState},
		{views: groupModelViews, state: groupModelsState},
		{command: (*app).messagingGroupsCmd, views: messagingGroupViews, state: messagingGroupsState},
		{command: (*app).membersCmd, views: memberViews, state: membersState},
		{command: (*app).destinationsCmd, views: destinationViews, state: destinationsState},
		{command: (*app).policiesCmd, views: policyViews, state: policiesState},
		{command: (*app).rolesCmd, views: roleViews, state: rolesState},
		{command: (*app).catalogCmd, views: catalogViews, state: catalogState},
		{command: (*app).wiringsCmd, views: wiringViews, state: wiringsState},

		{views: groupConfigViews},
		{views: modelBudgetViews},
		{command: (*app).mcpCmd, views: mcpViews},
		{command: (*app).egressCmd, views: egressViews},
		{command: (*app).sessionsCmd, views: sessionViews},
		{command: (*app).usageCmd, views: usageViews},
		{command: (*app).userDmsCmd, views: userDMViews},
		{command: (*app).tokensCmd, views: tokenViews},
		{command: (*app).runnersCmd, views: runnerViews},
		{command: (*app).decisionsCmd, views: decisionViews},
		{command: (*app).approvalsCmd, views: holdViews},
		{command: (*app).explainCmd, views: explainViews},
		{command: (*app).freezeCmd, views: freezeViews},
		{command: (*app).unfreezeCmd},
		{command: (*app).freezesCmd},
		{command: (*app).grantsCmd, views: grantViews},
	}
}

// allViews are every kind's views, the printer's table.
func allViews() render.Views {
	var all []render.View
	for _, k := range kinds() {
		all = append(all, k.views...)
	}
	return render.NewViews(all...)
}
