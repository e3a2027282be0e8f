package console

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/holdview"
)

// The read-only tables: groups, destinations, message policies, roles and
// runners, each read through its List RPC as the signed-in user.

// cell is a table cell: text, a link, and a secondary line (the id
// behind a name).
type cell struct{ Text, Href, Sub string }

type tableData struct {
	Headers []string
	Rows    [][]cell
	Empty   string
	Error   string
}

func txt(s string) cell { return cell{Text: s} }

// groupCell is a group by name with its id on a second line.
func groupCell(r *http.Request, id string) cell {
	if name := namesOf(r).GroupName(id); name != "" && name != id {
		return cell{Text: name, Sub: id}
	}
	return txt(id)
}

// userCell is a user by display name with their id on a second line.
func userCell(r *http.Request, id string) cell {
	if name := namesOf(r).UserName(id); name != "" {
		return cell{Text: name, Sub: id}
	}
	return txt(id)
}

// escalationWords is a policy's escalation plan in words ("—": none of its
// own, so a2a.send's applies).
func escalationWords(n holdview.Names, p *guardv1.MessagePolicy) string {
	var parts []string
	if d := p.GetRemindAfter(); d != nil {
		parts = append(parts, "remind after "+d.AsDuration().String())
	}
	if d := p.GetEscalateAfter(); d != nil {
		var who []string
		for _, u := range p.GetEscalateTo() {
			if g, ok := strings.CutPrefix(u, "group:"); ok {
				who = append(who, "admins of "+holdview.Group(n, g))
			} else {
				who = append(who, holdview.User(n, u))
			}
		}
		parts = append(parts, "add "+strings.Join(who, ", ")+" after "+d.AsDuration().String())
	}
	if len(parts) == 0 {
		return "—"
	}
	return strings.Join(parts, "; ")
}

// policyMode is a message policy's mode in words.
func policyMode(m guardv1.EnforcementMode) string {
	if m == guardv1.EnforcementMode_ENFORCEMENT_MODE_UNSPECIFIED {
		return "a2a.send's"
	}
	return enumword.String(m)
}

// policyMeans says what a message policy does, every approver, its quorum
// and its mode included.
func policyMeans(n holdview.Names, p *guardv1.MessagePolicy, approvers []string, need int) string {
	names := make([]string, len(approvers))
	for i, u := range approvers {
		names[i] = holdview.User(n, u)
	}
	route := "messages " + holdview.Group(n, p.GetFromGroup()) + " → " + holdview.Group(n, p.GetToGroup())
	var held string
	switch {
	case len(names) == 1:
		held = "held for " + names[0] + " alone"
	case need >= len(names):
		held = "held until all of " + strings.Join(names, ", ") + " approve"
	default:
		held = fmt.Sprintf("held until %d of %s approve", need, strings.Join(names, ", "))
	}
	switch p.GetMode() {
	case guardv1.EnforcementMode_ENFORCEMENT_MODE_AUDIT:
		return route + " run; the decision log records that they would be " + held + " (audit)"
	case guardv1.EnforcementMode_ENFORCEMENT_MODE_WARN:
		return route + " run; the agent and the group's admins are told they would be " + held + " (warn)"
	}
	means := route + " are " + held + " (nobody else, not even an owner; one reject rejects)"
	if p.GetMode() == guardv1.EnforcementMode_ENFORCEMENT_MODE_UNSPECIFIED {
		means += "; the mode is a2a.send's (ncl catalog list)"
	}
	return means
}

func (c *Console) table(w http.ResponseWriter, r *http.Request, s *session, nav, title string, t tableData, err error) {
	if err != nil {
		if status.Code(err) != codes.PermissionDenied {
			c.failRPC(w, r, s, err)
			return
		}
		// Read scoping said no: say so on the page (the menu stays usable).
		t.Error = status.Convert(err).Message()
	}
	c.renderNav(w, r, http.StatusOK, "table", nav, s, title, t)
}

func (c *Console) groupsPage(w http.ResponseWriter, r *http.Request, s *session) {
	resp, err := callAll[*guardv1.ListGroupsResponse](c, r, s, guardv1.Registry_ListGroups_FullMethodName, &guardv1.ListGroupsRequest{})
	t := tableData{Headers: []string{"ID", "NAME", "CLI SCOPE", "BASE IMAGE", "CREATED"}, Empty: "no groups you may read"}
	for _, g := range resp.GetGroups() {
		t.Rows = append(t.Rows, []cell{txt(g.GetId()), txt(g.GetName()), txt(enumword.String(g.GetConfig().GetCliScope())), txt(g.GetBaseImage()), txt(when(g.GetCreatedAt()))})
	}
	c.table(w, r, s, "groups", "Groups", t, err)
}

// destinationsPage lists one group's destinations (?group=), or those of
// every group the user may read (ListDestinations is per group).
func (c *Console) destinationsPage(w http.ResponseWriter, r *http.Request, s *session) {
	groups := []string{r.URL.Query().Get("group")}
	if groups[0] == "" {
		gs, err := callAll[*guardv1.ListGroupsResponse](c, r, s, guardv1.Registry_ListGroups_FullMethodName, &guardv1.ListGroupsRequest{})
		if err != nil {
			c.table(w, r, s, "destinations", "Destinations", tableData{}, err)
			return
		}
		groups = groups[:0]
		for _, g := range gs.GetGroups() {
			groups = append(groups, g.GetId())
		}
	}
	t := tableData{Headers: []string{"GROUP", "NAME", "TARGET GROUP", "TARGET CHAT"}, Empty: "no destinations you may read"}
	for _, g := range groups[:min(len(groups), 100)] {
		resp, err := callAll[*guardv1.ListDestinationsResponse](c, r, s, guardv1.Registry_ListDestinations_FullMethodName,
			&guardv1.ListDestinationsRequest{Group: g})
		if err != nil {
			c.table(w, r, s, "destinations", "Destinations", t, err)
			return
		}
		for _, d := range resp.GetDestinations() {
			t.Rows = append(t.Rows, []cell{groupCell(r, d.GetGroup()), txt(d.GetName()), groupCell(r, d.GetTargetGroup()), txt(d.GetTargetMessagingGroup())})
		}
	}
	c.table(w, r, s, "destinations", "Destinations", t, nil)
}

func (c *Console) policiesPage(w http.ResponseWriter, r *http.Request, s *session) {
	resp, err := callAll[*guardv1.ListPoliciesResponse](c, r, s, guardv1.Registry_ListPolicies_FullMethodName,
		&guardv1.ListPoliciesRequest{Group: r.URL.Query().Get("group")})
	t := tableData{Headers: []string{"FROM", "TO", "APPROVERS", "QUORUM", "MODE", "ESCALATION", "MEANS"}, Empty: "no message policies you may read"}
	n := namesOf(r).book()
	for _, p := range resp.GetPolicies() {
		approvers := append([]string{p.GetApproverUserId()}, p.GetAlsoApproverUserIds()...)
		need := max(int(p.GetApprovals()), 1)
		t.Rows = append(t.Rows, []cell{groupCell(r, p.GetFromGroup()), groupCell(r, p.GetToGroup()), txt(usersLabel(n, approvers)),
			txt(fmt.Sprintf("%d of %d", need, len(approvers))), txt(policyMode(p.GetMode())), txt(escalationWords(n, p)), txt(policyMeans(n, p, approvers, need))})
	}
	c.table(w, r, s, "policies", "Message policies", t, err)
}

func (c *Console) rolesPage(w http.ResponseWriter, r *http.Request, s *session) {
	resp, err := callAll[*guardv1.ListRolesResponse](c, r, s, guardv1.Registry_ListRoles_FullMethodName,
		&guardv1.ListRolesRequest{Group: r.URL.Query().Get("group")})
	t := tableData{Headers: []string{"USER", "ROLE", "SCOPE", "GROUP", "GRANTED"}, Empty: "no role grants you may read"}
	for _, g := range resp.GetRoles() {
		t.Rows = append(t.Rows, []cell{userCell(r, g.GetUserId()), txt(enumword.String(g.GetRole())), txt(enumword.String(g.GetScope())),
			groupCell(r, g.GetGroup()), txt(when(g.GetGrantedAt()))})
	}
	c.table(w, r, s, "roles", "Roles", t, err)
}

func (c *Console) runnersPage(w http.ResponseWriter, r *http.Request, s *session) {
	resp, err := callAll[*guardv1.ListRunnersResponse](c, r, s, guardv1.Registry_ListRunners_FullMethodName, &guardv1.ListRunnersRequest{})
	t := tableData{Headers: []string{"ID", "HOST", "VERSION", "LIVE", "SESSIONS", "LEASE EXPIRES", "CAPABILITIES"}, Empty: "no runners"}
	for _, x := range resp.GetRunners() {
		live := "no"
		if x.GetLive() {
			live = "yes"
		}
		caps := slices.Clone(x.GetCapabilities())
		t.Rows = append(t.Rows, []cell{txt(x.GetId()), txt(x.GetHost()), txt(x.GetVersion()), txt(live),
			txt(fmt.Sprint(x.GetSessions())), txt(when(x.GetLeaseExpiresAt())), txt(strings.Join(caps, ", "))})
	}
	c.table(w, r, s, "runners", "Runners", t, err)
}
