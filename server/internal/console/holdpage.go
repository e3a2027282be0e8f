package console

import (
	"net/http"
	"sort"
	"time"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/holdcard"
	"github.com/clawguard/clawguard/proto/holdview"
)

// The pending holds and a hold's page: what it asks, who may decide, its
// history, and the buttons when Resolve would take the click.

func (c *Console) holdsPage(w http.ResponseWriter, r *http.Request, s *session) {
	resp, err := call[*guardv1.ListResponse](c, r, s, guardv1.Approvals_List_FullMethodName,
		&guardv1.ListRequest{Status: guardv1.HoldStatus_HOLD_STATUS_PENDING, EligibleForMe: true, Limit: 200})
	if err != nil {
		c.failRPC(w, r, s, err)
		return
	}
	c.render(w, r, http.StatusOK, "holds", s, "Pending holds", resp.GetHolds())
}

// holdData is a hold's page.
type holdData struct {
	Hold *guardv1.Hold
	// Card is what the hold's card says (holdcard), which the page lays out.
	Card       holdcard.Card
	CanResolve bool
	// CanStand: the approve form offers "for this session" and "for N
	// hours" (a standing grant); never for a global-scope hold (D1).
	CanStand bool
	// Approved: this user's approval already counts toward the quorum.
	Approved bool
	// Counted: the approvals that count toward the quorum (an approver no
	// longer eligible is listed, marked, and not counted).
	Counted int
	// Waiting: approved, replayed with a grant, and not yet consumed — the
	// page follows the decision log until the replay's answer arrives.
	Waiting      bool
	Deciders     []string
	DecidersNote string
	Events       []holdEvent
	Decisions    []*guardv1.DecisionRecord
	// Outcome says what happened to a hold no longer pending ("" while
	// pending); PayloadHeading says what its payload is now.
	Outcome        string
	PayloadHeading string
	// Said is the answer to this user's last click, when the click did
	// nothing new: "already approved; 1 of 2".
	Said string
	// Grants: the standing grants its approval made, linked from the page.
	Grants []grantRow
}

type holdEvent struct {
	Type, Outcome, Resolver string
	At                      time.Time
}

func (c *Console) holdPage(w http.ResponseWriter, r *http.Request, s *session) {
	resp, err := call[*guardv1.GetResponse](c, r, s, guardv1.Approvals_Get_FullMethodName, &guardv1.GetRequest{Id: r.PathValue("id"), History: true})
	if err != nil {
		c.failRPC(w, r, s, err)
		return
	}
	h := resp.GetHold()
	d := holdData{Hold: h, Card: holdcard.Of(h)}
	// The buttons are there exactly when Resolve would accept the click.
	d.CanResolve = h.GetStatus() == guardv1.HoldStatus_HOLD_STATUS_PENDING && resp.GetMayResolve()
	d.CanStand = d.CanResolve && c.d.StandingGrantMax > 0 && h.GetApproverScope() != guardv1.ApproverScope_APPROVER_SCOPE_GLOBAL &&
		h.GetCatalogAction() != "" && h.GetAgentGroupId() != "" && h.GetRequester().GetAgent() != nil
	d.Counted, d.Approved = d.Card.Quorum.Counted, d.Card.Quorum.Mine(s.UserID)
	d.Waiting = h.GetStatus() == guardv1.HoldStatus_HOLD_STATUS_APPROVED && !h.GetConsumed() && h.GetCatalogAction() != "" &&
		h.GetResolvedAt() != nil && time.Since(h.GetResolvedAt().AsTime()) < 10*time.Minute
	d.Deciders, d.DecidersNote = c.deciders(r, s, h)
	for i, u := range d.Deciders {
		d.Deciders[i] = userLabel(namesOf(r).book(), u)
	}
	d.Outcome, d.PayloadHeading = outcomeWords(namesOf(r).book(), d.Card, time.Now())
	d.Grants = c.holdGrants(r, s, h)
	// The notice is this approver's own: anyone else's page says nothing.
	if r.URL.Query().Get("said") == saidAlready && (holdview.Approved(h, s.UserID) || h.GetResolver() == s.UserID) {
		d.Said = "Already approved; " + holdview.Progress(h, "") + ": your click changed nothing."
		if h.GetStatus() == guardv1.HoldStatus_HOLD_STATUS_PENDING {
			d.Said = "Already approved; " + holdview.Progress(h, "") + " — waiting for the other approvals."
		}
	}
	for _, e := range resp.GetEvents() {
		d.Events = append(d.Events, holdEvent{Type: enumword.String(e.GetType()), Outcome: enumword.String(e.GetOutcome()),
			Resolver: e.GetResolver(), At: e.GetAt().AsTime()})
	}
	// The decisions that made it and the replays that used it, each read
	// through GetDecision (so read scoping applies to them as well).
	for _, id := range resp.GetDecisionIds() {
		dr, err := call[*guardv1.GetDecisionResponse](c, r, s, guardv1.Registry_GetDecision_FullMethodName, &guardv1.GetDecisionRequest{Id: id})
		if err == nil {
			d.Decisions = append(d.Decisions, dr.GetDecision())
		}
	}
	c.render(w, r, http.StatusOK, "hold", s, h.GetTitle(), d)
}

// deciders lists who else may decide, as far as this user may read role
// grants (through ListRoles, like `ncl roles list`); what they may not read
// is said in words.
func (c *Console) deciders(r *http.Request, s *session, h *guardv1.Hold) ([]string, string) {
	rule := h.GetApproverRule()
	global := h.GetApproverScope() == guardv1.ApproverScope_APPROVER_SCOPE_GLOBAL
	if u := rule.GetExclusive().GetUserId(); u != "" {
		named := append([]string{u}, rule.GetExclusive().GetAlsoUserIds()...)
		named = append(named, rule.GetEscalatedUserIds()...) // added by its escalation
		if global {
			return named, "and only while an owner or a global admin"
		}
		return named, ""
	}
	a := rule.GetAdminsOfScope()
	if a == nil {
		return nil, "nobody: the hold has no approver rule"
	}
	seen := map[string]bool{}
	var out []string
	add := func(u string) {
		if u != "" && !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	note := ""
	reqs := []*guardv1.ListRolesRequest{{}}
	if a.GetAgentGroupId() != "" {
		reqs = append(reqs, &guardv1.ListRolesRequest{Group: a.GetAgentGroupId()})
	}
	var grants []*guardv1.RoleGrant
	for _, q := range reqs {
		resp, err := callAll[*guardv1.ListRolesResponse](c, r, s, guardv1.Registry_ListRoles_FullMethodName, q)
		if err != nil {
			note = "owners and global admins you may not list also may"
			continue
		}
		grants = append(grants, resp.GetRoles()...)
	}
	for _, g := range grants {
		top := g.GetRole() == guardv1.Role_ROLE_OWNER || g.GetScope() == guardv1.RoleScope_ROLE_SCOPE_GLOBAL
		scoped := g.GetRole() == guardv1.Role_ROLE_ADMIN && g.GetScope() == guardv1.RoleScope_ROLE_SCOPE_GROUP &&
			a.GetAgentGroupId() != "" && g.GetGroup() == a.GetAgentGroupId()
		if top || (scoped && !global) {
			add(g.GetUserId())
		}
	}
	if !global {
		add(a.GetDeliveredTo())
		// Added by its escalation (on a global hold only owners and
		// global admins, listed above, may decide).
		for _, u := range rule.GetEscalatedUserIds() {
			add(u)
		}
	}
	sort.Strings(out)
	return out, note
}

// saidAlready marks the hold page shown after a click that found this
// approver's approval already on record.
const saidAlready = "already"

// outcomeWords says what happened to a hold that is no longer pending (the
// card's outcome), and what its payload is now (for a pending one: what
// will run).
func outcomeWords(n holdview.Names, c holdcard.Card, now time.Time) (outcome, heading string) {
	o := c.Outcome
	by := userLabel(n, o.By)
	at := since(c.Hold.GetResolvedAt(), now)
	switch o.Status {
	case guardv1.HoldStatus_HOLD_STATUS_PENDING:
		return "", "The exact payload that will run"
	case guardv1.HoldStatus_HOLD_STATUS_APPROVED:
		outcome = "Approved by " + by + " " + at
		switch {
		case o.Unapplied != "":
			outcome += "; not carried out: " + o.Unapplied
			return outcome + ".", "The payload that was approved (it did not run)"
		case o.Replayed:
			return outcome + "; its replay used the grant.", "The payload that was approved and replayed"
		case c.Hold.GetCatalogAction() == "":
			return outcome + ".", "The payload that was approved"
		}
		return outcome + "; waiting for its replay.", "The payload that was approved (its replay is on its way)"
	case guardv1.HoldStatus_HOLD_STATUS_REJECTED:
		outcome = "Rejected by " + by + " " + at
		if o.Reason != "" {
			outcome += ": “" + o.Reason + "”"
		}
		return outcome + ". Nothing ran.", "The payload that was rejected (it did not run)"
	case guardv1.HoldStatus_HOLD_STATUS_EXPIRED:
		return "Expired " + at + ": nobody decided in time. Nothing ran.", "The payload that was asked for (it did not run)"
	case guardv1.HoldStatus_HOLD_STATUS_SWEPT:
		return "Swept " + at + " when the server restarted. Nothing ran.", "The payload that was asked for (it did not run)"
	}
	return enumword.String(o.Status), "The payload"
}
