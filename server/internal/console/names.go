package console

import (
	"context"
	"html/template"
	"net/http"
	"strings"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/holdview"
)

// names is one request's book of group and user names: read on first use
// through ListGroups and ListUsers as the signed-in user (so read scoping
// decides which names a page may show), once per request. A list the user
// may not read leaves its ids as they are.
type names struct {
	c *Console
	r *http.Request
	s *session

	groups map[string]*guardv1.Group
	users  map[string]*guardv1.User
	// called: what the readable groups' destinations call the groups they
	// target, for a group the user may not read (a scoped admin sees
	// "to ops", as the agent said it, not the target's id).
	called map[string]string
}

type namesKey struct{}

// withNames gives the request its name book.
func (c *Console) withNames(r *http.Request, s *session) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), namesKey{}, &names{c: c, r: r, s: s}))
}

// namesOf is the request's name book (nil outside a signed-in page).
func namesOf(r *http.Request) *names {
	n, _ := r.Context().Value(namesKey{}).(*names)
	return n
}

func (n *names) readGroups() {
	if n.groups != nil {
		return
	}
	n.groups = map[string]*guardv1.Group{}
	if resp, err := callAll[*guardv1.ListGroupsResponse](n.c, n.r, n.s, guardv1.Registry_ListGroups_FullMethodName, &guardv1.ListGroupsRequest{}); err == nil {
		for _, g := range resp.GetGroups() {
			n.groups[g.GetId()] = g
		}
	}
}

func (n *names) readUsers() {
	if n.users != nil {
		return
	}
	n.users = map[string]*guardv1.User{}
	if resp, err := callAll[*guardv1.ListUsersResponse](n.c, n.r, n.s, guardv1.Registry_ListUsers_FullMethodName, &guardv1.ListUsersRequest{}); err == nil {
		for _, u := range resp.GetUsers() {
			n.users[u.GetId()] = u
		}
	}
}

// maxCalledGroups bounds the destination lists read to name groups the
// user may not read (a scoped admin has few groups; an owner reads all).
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
		resp, err := callAll[*guardv1.ListDestinationsResponse](n.c, n.r, n.s, guardv1.Registry_ListDestinations_FullMethodName,
			&guardv1.ListDestinationsRequest{Group: id})
		if err != nil {
			continue
		}
		for _, d := range resp.GetDestinations() {
			if t := d.GetTargetGroup(); t != "" && n.called[t] == "" {
				n.called[t] = d.GetName()
			}
		}
	}
}

// GroupName is the group's name, or what a readable group's destination
// calls it ("" when neither is known).
func (n *names) GroupName(id string) string {
	if n == nil || id == "" {
		return ""
	}
	n.readGroups()
	if g, ok := n.groups[id]; ok {
		return g.GetName()
	}
	n.readCalled()
	return n.called[id]
}

// UserName is the user's display name ("" when none or not readable).
func (n *names) UserName(id string) string {
	if n == nil || id == "" {
		return ""
	}
	n.readUsers()
	return n.users[id].GetDisplayName()
}

// groupID is the id of the readable group whose id or only name is ref,
// else ref as it is (the server answers for it).
func (n *names) groupID(ref string) string {
	if n == nil {
		return ref
	}
	n.readGroups()
	if _, ok := n.groups[ref]; ok {
		return ref
	}
	found := ""
	for id, g := range n.groups {
		if g.GetName() == ref {
			if found != "" {
				return ref // two alike: the name decides nothing
			}
			found = id
		}
	}
	if found != "" {
		return found
	}
	return ref
}

// targetID is groupID, and else the target group of from's destination
// named ref (what from's agents call it: an admin reads their group's
// destinations, not always the target group itself). `ncl explain` reads
// a2a.send's target the same way.
func (n *names) targetID(ref, from string) string {
	if id := n.groupID(ref); id != ref || from == "" {
		return id
	}
	if _, ok := n.groups[ref]; ok {
		return ref
	}
	resp, err := callAll[*guardv1.ListDestinationsResponse](n.c, n.r, n.s, guardv1.Registry_ListDestinations_FullMethodName,
		&guardv1.ListDestinationsRequest{Group: from})
	if err != nil {
		return ref
	}
	for _, d := range resp.GetDestinations() {
		if d.GetName() == ref && d.GetTargetGroup() != "" {
			return d.GetTargetGroup()
		}
	}
	return ref
}

// userID is the id of the user whose id or only display name is ref
// (a user id has a colon: it is taken as it is), else ref.
func (n *names) userID(ref string) string {
	if n == nil || strings.Contains(ref, ":") {
		return ref
	}
	n.readUsers()
	found := ""
	for id, u := range n.users {
		if u.GetDisplayName() == ref {
			if found != "" {
				return ref
			}
			found = id
		}
	}
	if found != "" {
		return found
	}
	return ref
}

// book is n as holdview.Names (a nil *names must not become a non-nil
// interface whose methods run on nil).
func (n *names) book() holdview.Names {
	if n == nil {
		return nil
	}
	return n
}

// ref is a name with its id one step away: "research" with the id as the
// element's title, or the id alone (in code) when no name is known.
func ref(name, id string) template.HTML {
	e := template.HTMLEscapeString
	if id == "" {
		return "—"
	}
	if name == "" || name == id {
		return template.HTML(`<code class="id">` + e(id) + `</code>`)
	}
	return template.HTML(`<span class="ref" title="` + e(id) + `">` + e(name) + `</span>`)
}

// refLine is ref with the id on a second line (pages read on a phone,
// where a title shows nowhere).
func refLine(name, id string) template.HTML {
	if name == "" || name == id {
		return ref(name, id)
	}
	return ref(name, id) + template.HTML(` <code class="id sub">`+template.HTMLEscapeString(id)+`</code>`)
}

// userLabel is "Dana (telegram:dana)", or the id alone.
func userLabel(n holdview.Names, id string) string {
	if name := holdview.User(n, id); name != id {
		return name + " (" + id + ")"
	}
	return id
}

// usersLabel lists users by label.
func usersLabel(n holdview.Names, ids []string) string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		out = append(out, userLabel(n, id))
	}
	return strings.Join(out, ", ")
}

// MayBeGroup is holdview.GroupWords: a readable group's id, or a word
// shaped like a group id (named, if at all, by what a readable group's
// destination calls it).
func (n *names) MayBeGroup(w string) bool {
	if n == nil {
		return false
	}
	n.readGroups()
	_, ok := n.groups[w]
	return ok || holdview.LooksLikeGroupID(w)
}
