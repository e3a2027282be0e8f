package ncl

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// A change is one admin RPC that moves the server toward the document.
type change struct {
	op   byte // '+' create, '~' change, '-' delete
	what string
	// run makes the change; book is the groups as they are by then (a
	// group created earlier in the same apply has its id).
	run func(ctx context.Context, c *clients, book groupBook) error
}

func (ch change) String() string { return string(ch.op) + " " + ch.what }

// plan lists the changes that make cur into want, in dependency order:
// users and groups before what names them; deletions last, in reverse, and
// only with prune (unpruned ones come back as left).
func plan(cur, want *state, prune bool) (changes []change, left []string) {
	models := planModels(cur, want)
	dels := models.lastDels
	// Users (never deleted: the API has no user deletion).
	have := map[string]userSpec{}
	for _, u := range cur.Users {
		have[u.ID] = u
	}
	for _, u := range want.Users {
		switch old, ok := have[u.ID]; {
		case !ok:
			changes = append(changes, change{'+', "user " + u.ID + named(u.Name), func(ctx context.Context, c *clients, _ groupBook) error {
				_, err := c.reg.CreateUser(ctx, &guardv1.CreateUserRequest{Id: u.ID, DisplayName: u.Name})
				return err
			}})
		case old.Name != u.Name:
			changes = append(changes, change{'~', fmt.Sprintf("user %s: name %q → %q", u.ID, old.Name, u.Name), func(ctx context.Context, c *clients, _ groupBook) error {
				_, err := c.reg.UpdateUser(ctx, &guardv1.UpdateUserRequest{Id: u.ID, DisplayName: u.Name})
				return err
			}})
		}
	}
	for _, u := range cur.Users {
		if !slices.ContainsFunc(want.Users, func(w userSpec) bool { return w.ID == u.ID }) {
			left = append(left, "user "+u.ID+" (users are never deleted by apply)")
		}
	}
	binds, unbinds := planOIDC(cur.Users, want.Users)
	changes, dels = append(changes, binds...), append(dels, unbinds...)
	changes = append(changes, models.providers...)

	// Groups.
	groups := map[string]groupSpec{}
	for _, g := range cur.Groups {
		groups[g.Name] = g
	}
	var pkgAdds []change
	for _, g := range want.Groups {
		old, ok := groups[g.Name]
		// Packages: what the document lists and the group lacks is added
		// (after the group, when it is new); the rest removed with prune.
		for _, m := range []struct {
			manager   guardv1.PackageManager
			have, got []string
		}{{guardv1.PackageManager_PACKAGE_MANAGER_APT, old.AptPackages, g.AptPackages}, {guardv1.PackageManager_PACKAGE_MANAGER_NPM, old.NpmPackages, g.NpmPackages}} {
			word := enumword.String(m.manager)
			var add []string
			for _, p := range m.got {
				if !slices.Contains(m.have, p) {
					add = append(add, p)
				}
			}
			if len(add) > 0 { // after every group's own changes, created or changed
				pkgAdds = append(pkgAdds, change{'+', fmt.Sprintf("%s packages of group %s: %s", word, g.Name, strings.Join(add, ", ")),
					func(ctx context.Context, c *clients, book groupBook) error {
						_, err := c.reg.AddGroupPackage(ctx, &guardv1.AddGroupPackageRequest{Group: idOr(book, g.Name), Manager: m.manager, Packages: add})
						return err
					}})
			}
			for _, p := range m.have {
				if !slices.Contains(m.got, p) {
					dels = append(dels, change{'-', fmt.Sprintf("%s package %s of group %s", word, p, g.Name), func(ctx context.Context, c *clients, book groupBook) error {
						_, err := c.reg.RemoveGroupPackage(ctx, &guardv1.RemoveGroupPackageRequest{Group: idOr(book, g.Name), Manager: m.manager, Package: p})
						return err
					}})
				}
			}
		}
		// MCP servers: a changed one is replaced in one call, which keeps
		// each env value the document writes as "<redacted>" (the server
		// never reads one out; a value written out is set, and the server
		// cannot say whether it is the one it holds).
		for _, m := range g.MCPServers {
			i := slices.IndexFunc(old.MCPServers, func(o mcpServerSpec) bool { return o.Name == m.Name })
			if i >= 0 && old.MCPServers[i].equal(m) {
				continue
			}
			op, what := byte('+'), fmt.Sprintf("mcp server %s of group %s: %s", m.Name, g.Name, strings.Join(append([]string{m.Command}, m.Args...), " "))
			if i >= 0 {
				op = '~'
			}
			if set := m.setEnv(); len(set) > 0 {
				what += " (env " + strings.Join(set, ", ") + " set from the document)"
			}
			replace := i >= 0
			pkgAdds = append(pkgAdds, change{op, what, func(ctx context.Context, c *clients, book groupBook) error {
				_, err := c.reg.AddGroupMcpServer(ctx, &guardv1.AddGroupMcpServerRequest{Group: idOr(book, g.Name), Replace: replace,
					Server: &guardv1.McpServer{Name: m.Name, Command: m.Command, Args: m.Args, Env: m.Env, Image: m.Image}})
				return err
			}})
		}
		settings, unset := planMCPSettings(old, g)
		pkgAdds, dels = append(pkgAdds, settings...), append(dels, unset...)
		agent, unsetRules := planGroupAgent(old, g)
		pkgAdds, dels = append(pkgAdds, agent...), append(dels, unsetRules...)
		for _, o := range old.MCPServers {
			if !slices.ContainsFunc(g.MCPServers, func(m mcpServerSpec) bool { return m.Name == o.Name }) {
				dels = append(dels, change{'-', fmt.Sprintf("mcp server %s of group %s", o.Name, g.Name), func(ctx context.Context, c *clients, book groupBook) error {
					_, err := c.reg.RemoveGroupMcpServer(ctx, &guardv1.RemoveGroupMcpServerRequest{Group: idOr(book, g.Name), Name: o.Name})
					return err
				}})
			}
		}
		if !ok {
			changes = append(changes, change{'+', "group " + g.Name, func(ctx context.Context, c *clients, book groupBook) error {
				scope, err := enumword.Parse[guardv1.CliScope](g.CLIScope)
				if err != nil {
					return fmt.Errorf("group %s: cliScope: %w", g.Name, err)
				}
				r, err := c.reg.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: g.Name, CliScope: scope, BaseImage: g.BaseImage, PinnedHost: g.PinnedHost})
				if err == nil {
					book.id[g.Name], book.name[r.GetGroup().GetId()] = r.GetGroup().GetId(), g.Name
				}
				return err
			}})
			continue
		}
		if old.BaseImage != g.BaseImage || old.PinnedHost != g.PinnedHost {
			changes = append(changes, change{'~', fmt.Sprintf("group %s: baseImage %q → %q, pinnedHost %q → %q", g.Name, old.BaseImage, g.BaseImage, old.PinnedHost, g.PinnedHost),
				func(ctx context.Context, c *clients, book groupBook) error {
					pinned := g.PinnedHost
					_, err := c.reg.UpdateGroup(ctx, &guardv1.UpdateGroupRequest{Id: book.id[g.Name], BaseImage: g.BaseImage, PinnedHost: &pinned})
					return err
				}})
		}
		if old.CLIScope != g.CLIScope {
			changes = append(changes, change{'~', fmt.Sprintf("group %s: cliScope %s → %s", g.Name, old.CLIScope, g.CLIScope),
				func(ctx context.Context, c *clients, book groupBook) error {
					scope, err := enumword.Parse[guardv1.CliScope](g.CLIScope)
					if err != nil {
						return fmt.Errorf("group %s: cliScope: %w", g.Name, err)
					}
					_, err = c.reg.UpdateGroupConfig(ctx, &guardv1.UpdateGroupConfigRequest{Group: book.id[g.Name], CliScope: scope})
					return err
				}})
		}
	}
	for _, g := range cur.Groups {
		if !slices.ContainsFunc(want.Groups, func(w groupSpec) bool { return w.Name == g.Name }) {
			dels = append(dels, change{'-', "group " + g.Name + " (and everything of it: sessions, destinations, roles)", func(ctx context.Context, c *clients, book groupBook) error {
				_, err := c.reg.DeleteGroup(ctx, &guardv1.DeleteGroupRequest{Id: book.id[g.Name]})
				return err
			}})
		}
	}

	changes = append(changes, pkgAdds...)
	changes, dels = append(changes, models.groups...), append(dels, models.dels...)

	// Messaging groups (chats); a chat's kind (group chat or DM) and a
	// rejected registration are the server's, never changed by apply.
	chats := map[string]messagingGroupSpec{}
	for _, m := range cur.MessagingGroups {
		chats[m.key()] = m
	}
	for _, m := range want.MessagingGroups {
		old, ok := chats[m.key()]
		if !ok {
			changes = append(changes, change{'+', "messaging group " + m.key() + named(m.Name), func(ctx context.Context, c *clients, book groupBook) error {
				if m.Denied {
					return fmt.Errorf("messaging group %s: denied is set by rejecting a registration, not by apply", m.key())
				}
				pol, err := senderPolicy(m.UnknownSenderPolicy)
				if err != nil {
					return fmt.Errorf("messaging group %s: %w", m.key(), err)
				}
				r, err := c.reg.CreateMessagingGroup(ctx, &guardv1.CreateMessagingGroupRequest{ChannelType: m.ChannelType, PlatformId: m.PlatformID,
					Name: m.Name, UnknownSenderPolicy: pol, IsGroup: m.GroupChat})
				if err == nil {
					book.chat[m.key()], book.key[r.GetMessagingGroup().GetId()] = r.GetMessagingGroup().GetId(), m.key()
				}
				return err
			}})
			continue
		}
		if old.GroupChat != m.GroupChat || old.Denied != m.Denied {
			changes = append(changes, change{'~', fmt.Sprintf("messaging group %s: groupChat %v → %v, denied %v → %v", m.key(), old.GroupChat, m.GroupChat, old.Denied, m.Denied),
				func(context.Context, *clients, groupBook) error {
					return fmt.Errorf("messaging group %s: groupChat and denied are the server's; delete the chat (--prune) to change them", m.key())
				}})
		}
		// An empty name or policy leaves the server's as it is (the API
		// cannot clear a name; the policy's default is the server's).
		if (m.Name != "" && old.Name != m.Name) || (m.UnknownSenderPolicy != "" && old.UnknownSenderPolicy != m.UnknownSenderPolicy) {
			changes = append(changes, change{'~', fmt.Sprintf("messaging group %s: name %q → %q, unknownSenderPolicy %s → %s", m.key(), old.Name, m.Name, old.UnknownSenderPolicy, m.UnknownSenderPolicy),
				func(ctx context.Context, c *clients, book groupBook) error {
					pol, err := senderPolicy(m.UnknownSenderPolicy)
					if err != nil {
						return fmt.Errorf("messaging group %s: %w", m.key(), err)
					}
					_, err = c.reg.UpdateMessagingGroup(ctx, &guardv1.UpdateMessagingGroupRequest{Id: book.chatID(m.key()), Name: m.Name, UnknownSenderPolicy: pol})
					return err
				}})
		}
	}
	for _, m := range cur.MessagingGroups {
		if !slices.ContainsFunc(want.MessagingGroups, func(w messagingGroupSpec) bool { return w.key() == m.key() }) {
			dels = append(dels, change{'-', "messaging group " + m.key(), func(ctx context.Context, c *clients, book groupBook) error {
				_, err := c.reg.DeleteMessagingGroup(ctx, &guardv1.DeleteMessagingGroupRequest{Id: book.chatID(m.key())})
				return err
			}})
		}
	}

	// Members.
	for _, m := range want.Members {
		if slices.ContainsFunc(cur.Members, func(o memberSpec) bool { return o == m }) {
			continue
		}
		changes = append(changes, change{'+', "member " + m.key(), func(ctx context.Context, c *clients, book groupBook) error {
			_, err := c.reg.AddMember(ctx, &guardv1.AddMemberRequest{Group: idOr(book, m.Group), UserId: m.User})
			return err
		}})
	}
	for _, m := range cur.Members {
		if !slices.Contains(want.Members, m) {
			dels = append(dels, change{'-', "member " + m.key(), func(ctx context.Context, c *clients, book groupBook) error {
				_, err := c.reg.RemoveMember(ctx, &guardv1.RemoveMemberRequest{Group: idOr(book, m.Group), UserId: m.User})
				return err
			}})
		}
	}

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
		changes = append(changes, change{op, what, func(ctx context.Context, c *clients, book groupBook) error {
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
			dels = append(dels, change{'-', "destination " + d.key(), func(ctx context.Context, c *clients, book groupBook) error {
				_, err := c.reg.RemoveDestination(ctx, &guardv1.RemoveDestinationRequest{Group: idOr(book, d.Group), Name: d.Name})
				return err
			}})
		}
	}

	// Message policies: set is create-or-replace.
	policies := map[string]policySpec{}
	for _, p := range cur.Policies {
		policies[p.key()] = p
	}
	for _, p := range want.Policies {
		old, ok := policies[p.key()]
		if ok && slices.Equal(old.Approvers, p.Approvers) && old.Approvals == p.Approvals && old.Mode == p.Mode && old.EscalationSpec.equal(p.EscalationSpec) {
			continue
		}
		op, what := byte('+'), fmt.Sprintf("policy %s: approvers %s%s", p.key(), strings.Join(p.Approvers, ", "), quorumWords(p, false))
		if ok {
			op = '~'
			modes := old.Mode != p.Mode // "" (inherit) and "enforce" differ: say so
			what = fmt.Sprintf("policy %s: approvers %s%s → %s%s", p.key(), strings.Join(old.Approvers, ", "), quorumWords(old, modes), strings.Join(p.Approvers, ", "), quorumWords(p, modes))
		}
		changes = append(changes, change{op, what, func(ctx context.Context, c *clients, book groupBook) error {
			if len(p.Approvers) == 0 {
				return fmt.Errorf("policy %s: at least one approver", p.key())
			}
			mode, err := parseMode(p.Mode)
			if err != nil {
				return fmt.Errorf("policy %s: %w", p.key(), err)
			}
			remind, escalate, to, err := p.EscalationSpec.request()
			if err != nil {
				return fmt.Errorf("policy %s: %w", p.key(), err)
			}
			_, err = c.reg.SetPolicy(ctx, &guardv1.SetPolicyRequest{FromGroup: idOr(book, p.From), ToGroup: idOr(book, p.To),
				ApproverUserId: p.Approvers[0], AlsoApproverUserIds: p.Approvers[1:], Approvals: p.Approvals, Mode: mode,
				RemindAfter: remind, EscalateAfter: escalate, EscalateTo: to})
			return err
		}})
	}
	for _, p := range cur.Policies {
		if _, ok := policyIn(want.Policies, p.key()); !ok {
			dels = append(dels, change{'-', "policy " + p.key(), func(ctx context.Context, c *clients, book groupBook) error {
				_, err := c.reg.RemovePolicy(ctx, &guardv1.RemovePolicyRequest{FromGroup: idOr(book, p.From), ToGroup: idOr(book, p.To)})
				return err
			}})
		}
	}

	// Roles.
	for _, r := range want.Roles {
		if slices.ContainsFunc(cur.Roles, func(o roleSpec) bool { return o.key() == r.key() }) {
			continue
		}
		changes = append(changes, change{'+', "role " + r.key(), func(ctx context.Context, c *clients, book groupBook) error {
			req, err := roleRequest(r, book)
			if err != nil {
				return err
			}
			_, err = c.reg.GrantRole(ctx, &guardv1.GrantRoleRequest{UserId: req.UserId, Role: req.Role, Scope: req.Scope, Group: req.Group})
			return err
		}})
	}
	for _, r := range cur.Roles {
		if !slices.ContainsFunc(want.Roles, func(w roleSpec) bool { return w.key() == r.key() }) {
			dels = append(dels, change{'-', "role " + r.key(), func(ctx context.Context, c *clients, book groupBook) error {
				req, err := roleRequest(r, book)
				if err != nil {
					return err
				}
				_, err = c.reg.RevokeRole(ctx, req)
				return err
			}})
		}
	}

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
		changes = append(changes, change{op, what, setAction(a)})
	}
	for _, a := range cur.Catalog {
		if _, ok := actions[a.Action]; ok && !slices.ContainsFunc(want.Catalog, func(w actionSpec) bool { return w.Action == a.Action }) {
			dels = append(dels, change{'-', "catalog " + a.Action + " settings (back to the defaults)", setAction(actionSpec{Action: a.Action})})
		}
	}

	// Wirings: last, once their chats and groups exist; deleted first.
	for _, w := range want.Wirings {
		if slices.ContainsFunc(cur.Wirings, func(o wiringSpec) bool { return o.key() == w.key() }) {
			continue
		}
		changes = append(changes, change{'+', "wiring " + w.key(), func(ctx context.Context, c *clients, book groupBook) error {
			_, err := c.reg.CreateWiring(ctx, &guardv1.CreateWiringRequest{MessagingGroup: book.chatID(w.Chat), Group: idOr(book, w.Group)})
			return err
		}})
	}
	for _, w := range cur.Wirings {
		if !slices.ContainsFunc(want.Wirings, func(o wiringSpec) bool { return o.key() == w.key() }) {
			dels = append(dels, change{'-', "wiring " + w.key(), func(ctx context.Context, c *clients, _ groupBook) error {
				_, err := c.reg.DeleteWiring(ctx, &guardv1.DeleteWiringRequest{Id: w.id})
				return err
			}})
		}
	}

	slices.Reverse(dels) // what names a group or a chat goes before it
	if prune {
		return append(changes, dels...), left
	}
	for _, d := range dels {
		left = append(left, d.what)
	}
	return changes, left
}

// senderPolicy is an unknownSenderPolicy word; empty is the server's default.
func senderPolicy(word string) (guardv1.SenderPolicy, error) {
	if word == "" {
		return guardv1.SenderPolicy_SENDER_POLICY_UNSPECIFIED, nil
	}
	p, err := enumword.Parse[guardv1.SenderPolicy](word)
	if err != nil {
		return 0, fmt.Errorf("unknownSenderPolicy: %w", err)
	}
	return p, nil
}

func named(name string) string {
	if name == "" {
		return ""
	}
	return " (" + name + ")"
}

// quorumWords says a policy's quorum, mode (always with showMode: "inherit"
// for none) and escalation.
func quorumWords(p policySpec, showMode bool) string {
	w := ""
	if p.Approvals > 1 {
		w += fmt.Sprintf(", %d of them", p.Approvals)
	}
	switch {
	case p.Mode != "":
		w += ", mode " + p.Mode
	case showMode:
		w += ", mode inherit"
	}
	return w + p.EscalationSpec.words()
}

func orEnforce(mode string) string {
	if mode == "" {
		return "enforce"
	}
	return mode
}

func policyIn(list []policySpec, key string) (policySpec, bool) {
	for _, p := range list {
		if p.key() == key {
			return p, true
		}
	}
	return policySpec{}, false
}

// idOr is a group's id by its name, or the name as it is (the server says
// when it is no group).
func idOr(book groupBook, name string) string {
	if id, ok := book.id[name]; ok {
		return id
	}
	return name
}

func roleRequest(r roleSpec, book groupBook) (*guardv1.RevokeRoleRequest, error) {
	role, err := enumword.Parse[guardv1.Role](r.Role)
	if err != nil {
		return nil, fmt.Errorf("role %s: %w", r.key(), err)
	}
	scope, err := enumword.Parse[guardv1.RoleScope](r.Scope)
	if err != nil {
		return nil, fmt.Errorf("role %s: scope: %w", r.key(), err)
	}
	req := &guardv1.RevokeRoleRequest{UserId: r.User, Role: role, Scope: scope}
	if r.Group != "" {
		req.Group = idOr(book, r.Group)
	}
	return req, nil
}

// heldAs is the hold a change became, when the server held it for approval
// (an agent's admin command, as every mutation of one is).
func heldAs(err error) (string, bool) {
	st, ok := status.FromError(err) // a wrapped status too
	if !ok || st.Code() != codes.FailedPrecondition {
		return "", false
	}
	for _, d := range st.Details() {
		if p, ok := d.(*guardv1.ApprovalPending); ok {
			return p.GetHoldId(), true
		}
	}
	return "", false
}
