package console

import (
	"net/http"
	"strings"

	"google.golang.org/grpc/status"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// The freezes page: what is frozen, a freeze form and an unfreeze button
// per freeze, each a call as the signed-in user (Registry.Freeze checks
// their roles: owners and global admins any scope, a group's admins their
// group).

type freezeRow struct {
	Scope, Target, What, By, Since, Reason string
}

type freezesData struct {
	Freezes []freezeRow
	Error   string
}

func (c *Console) freezesPage(w http.ResponseWriter, r *http.Request, s *session) {
	c.renderFreezes(w, r, s, http.StatusOK, "")
}

func (c *Console) renderFreezes(w http.ResponseWriter, r *http.Request, s *session, code int, problem string) {
	d := freezesData{Error: problem}
	resp, err := call[*guardv1.ListFreezesResponse](c, r, s, guardv1.Registry_ListFreezes_FullMethodName, &guardv1.ListFreezesRequest{})
	if err != nil {
		c.failRPC(w, r, s, err)
		return
	}
	n := namesOf(r)
	for _, f := range resp.GetFreezes() {
		row := freezeRow{Scope: enumword.String(f.GetScope()), By: userLabel(n.book(), f.GetFrozenBy()), Since: when(f.GetFrozenAt()), Reason: f.GetReason()}
		switch {
		case f.GetGroup() != "":
			row.Target, row.What = f.GetGroup(), "group "+n.GroupName(f.GetGroup())
		case f.GetRunner() != "":
			row.Target, row.What = f.GetRunner(), "runner "+f.GetRunner()
		default:
			row.What = "every agent"
		}
		d.Freezes = append(d.Freezes, row)
	}
	c.render(w, r, code, "freezes", s, "Freezes", d)
}

// freezeTarget reads a form's scope and target (a group by name or id).
func freezeTarget(r *http.Request) (guardv1.FreezeScope, string, string, bool) {
	target := strings.TrimSpace(r.PostFormValue("target"))
	switch r.PostFormValue("scope") {
	case "all":
		return guardv1.FreezeScope_FREEZE_SCOPE_ALL, "", "", true
	case "group":
		return guardv1.FreezeScope_FREEZE_SCOPE_GROUP, namesOf(r).groupID(target), "", target != ""
	case "runner":
		return guardv1.FreezeScope_FREEZE_SCOPE_RUNNER, "", target, target != ""
	}
	return 0, "", "", false
}

func (c *Console) freeze(w http.ResponseWriter, r *http.Request, s *session) {
	scope, group, runner, ok := freezeTarget(r)
	if !ok {
		c.renderFreezes(w, r, s, http.StatusBadRequest, "name the group or the runner to freeze (or choose every agent)")
		return
	}
	_, err := call[*guardv1.FreezeResponse](c, r, s, guardv1.Registry_Freeze_FullMethodName,
		&guardv1.FreezeRequest{Scope: scope, Group: group, Runner: runner, Reason: strings.TrimSpace(r.PostFormValue("reason"))})
	c.afterFreeze(w, r, s, err)
}

func (c *Console) unfreeze(w http.ResponseWriter, r *http.Request, s *session) {
	scope, group, runner, ok := freezeTarget(r)
	if !ok {
		c.renderFreezes(w, r, s, http.StatusBadRequest, "which freeze to lift is missing")
		return
	}
	_, err := call[*guardv1.UnfreezeResponse](c, r, s, guardv1.Registry_Unfreeze_FullMethodName,
		&guardv1.UnfreezeRequest{Scope: scope, Group: group, Runner: runner})
	c.afterFreeze(w, r, s, err)
}

// afterFreeze shows the list again: the refusal in words, or the new state
// (a redirect, so a reload does not post twice).
func (c *Console) afterFreeze(w http.ResponseWriter, r *http.Request, s *session, err error) {
	if err != nil {
		c.renderFreezes(w, r, s, http.StatusBadRequest, status.Convert(err).Message())
		return
	}
	http.Redirect(w, r, "/freezes", http.StatusSeeOther)
}
