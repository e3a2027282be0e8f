package console

import (
	"net/http"
	"strings"

	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// The standing grants page: the live approvals "for this session" or "for
// N hours" the signed-in user may revoke (ListStandingGrants filters by
// who may resolve each grant's hold), each with a Revoke button.

type grantRow struct {
	ID, Action, Group, Resource, ApprovedBy, Until, Session string
	Uses                                                    int64
}

type grantsData struct {
	Grants []grantRow
	Error  string
}

func (c *Console) grantsPage(w http.ResponseWriter, r *http.Request, s *session) {
	c.renderGrants(w, r, s, http.StatusOK, "")
}

func (c *Console) renderGrants(w http.ResponseWriter, r *http.Request, s *session, code int, problem string) {
	resp, err := call[*guardv1.ListStandingGrantsResponse](c, r, s, guardv1.Approvals_ListStandingGrants_FullMethodName, &guardv1.ListStandingGrantsRequest{})
	if err != nil {
		c.failRPC(w, r, s, err)
		return
	}
	n := namesOf(r)
	d := grantsData{Error: problem}
	for _, g := range resp.GetGrants() {
		var by []string
		for _, u := range g.GetApprovedBy() {
			by = append(by, userLabel(n.book(), u))
		}
		var res []string
		for k, v := range g.GetResource() {
			if k == "to" {
				v = n.GroupName(v)
			}
			res = append(res, k+"="+v)
		}
		session := "any"
		if g.GetSessionId() != "" {
			session = g.GetSessionId()
		}
		d.Grants = append(d.Grants, grantRow{ID: g.GetId(), Action: g.GetCatalogAction(), Group: n.GroupName(g.GetAgentGroupId()),
			Resource: strings.Join(res, " "), ApprovedBy: strings.Join(by, ", "), Until: when(g.GetExpiresAt()), Session: session, Uses: g.GetUses()})
	}
	c.render(w, r, code, "grants", s, "Standing grants", d)
}

func (c *Console) revokeGrant(w http.ResponseWriter, r *http.Request, s *session) {
	id := strings.TrimSpace(r.PostFormValue("id"))
	if id == "" {
		c.renderGrants(w, r, s, http.StatusBadRequest, "which standing grant to revoke is missing")
		return
	}
	_, err := call[*guardv1.RevokeStandingGrantResponse](c, r, s, guardv1.Approvals_RevokeStandingGrant_FullMethodName, &guardv1.RevokeStandingGrantRequest{Id: id})
	if err != nil {
		c.renderGrants(w, r, s, http.StatusBadRequest, status.Convert(err).Message())
		return
	}
	http.Redirect(w, r, "/grants", http.StatusSeeOther)
}
