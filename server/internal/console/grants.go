package console

import (
	"net/http"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/holdview"
)

// The standing grants page: the live approvals "for this session" or "for
// N hours" the signed-in user may revoke (ListStandingGrants filters by
// who may resolve each grant's hold), each with a Revoke button.

type grantRow struct {
	ID, Action, Group, Resource, ApprovedBy, Until, Session, Ended string
	Uses                                                           int64
}

type grantsData struct {
	Grants []grantRow
	Error  string
	// Ended: the list includes grants that expired or were revoked.
	Ended bool
}

func (c *Console) grantsPage(w http.ResponseWriter, r *http.Request, s *session) {
	c.renderGrants(w, r, s, http.StatusOK, "")
}

func (c *Console) renderGrants(w http.ResponseWriter, r *http.Request, s *session, code int, problem string) {
	d := grantsData{Error: problem, Ended: r.URL.Query().Get("ended") == "1"}
	resp, err := call[*guardv1.ListStandingGrantsResponse](c, r, s, guardv1.Approvals_ListStandingGrants_FullMethodName,
		&guardv1.ListStandingGrantsRequest{IncludeEnded: d.Ended})
	if err != nil {
		c.failRPC(w, r, s, err)
		return
	}
	for _, g := range resp.GetGrants() {
		d.Grants = append(d.Grants, grantRowOf(r, g))
	}
	c.render(w, r, code, "grants", s, "Standing grants", d)
}

// holdGrants are the standing grants a hold's approval made ("for this
// session", "for 8 hours"), for its page to link to.
func (c *Console) holdGrants(r *http.Request, s *session, h *guardv1.Hold) []grantRow {
	if h.GetStatus() != guardv1.HoldStatus_HOLD_STATUS_APPROVED || h.GetAgentGroupId() == "" {
		return nil
	}
	resp, err := call[*guardv1.ListStandingGrantsResponse](c, r, s, guardv1.Approvals_ListStandingGrants_FullMethodName,
		&guardv1.ListStandingGrantsRequest{AgentGroupId: h.GetAgentGroupId(), IncludeEnded: true})
	if err != nil {
		return nil
	}
	var out []grantRow
	for _, g := range resp.GetGrants() {
		if g.GetHoldId() == h.GetId() {
			out = append(out, grantRowOf(r, g))
		}
	}
	return out
}

// grantRowOf is a standing grant as a row: groups and users by name.
func grantRowOf(r *http.Request, g *guardv1.StandingGrant) grantRow {
	n := namesOf(r)
	var by []string
	for _, u := range g.GetApprovedBy() {
		by = append(by, userLabel(n.book(), u))
	}
	var res []string
	for k, v := range g.GetResource() {
		res = append(res, k+"="+holdview.Words(n.book(), v))
	}
	sort.Strings(res)
	session := "any"
	if g.GetSessionId() != "" {
		session = g.GetSessionId()
	}
	row := grantRow{ID: g.GetId(), Action: g.GetCatalogAction(), Group: holdview.Group(n.book(), g.GetAgentGroupId()),
		Resource: strings.Join(res, " "), ApprovedBy: strings.Join(by, ", "), Until: when(g.GetExpiresAt()), Session: session, Uses: g.GetUses()}
	switch {
	case g.GetRevokedAt() != nil:
		row.Ended = "revoked by " + userLabel(n.book(), g.GetRevokedBy()) + " " + when(g.GetRevokedAt())
	case !g.GetExpiresAt().AsTime().After(time.Now()):
		row.Ended = "expired"
	}
	return row
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
