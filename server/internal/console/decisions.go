package console

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// The decision log and a decision's "why" page.

type decisionsData struct {
	Decisions           []*guardv1.DecisionRecord
	Action, Effect      string
	Group, Actor, Since string // as typed: a name or an id; a duration ago or RFC 3339
	Reads               bool
}

func (c *Console) decisionsPage(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	d := decisionsData{Action: q.Get("action"), Effect: q.Get("effect"), Group: strings.TrimSpace(q.Get("group")),
		Actor: strings.TrimSpace(q.Get("actor")), Since: strings.TrimSpace(q.Get("since")), Reads: q.Get("reads") == "on"}
	req := &guardv1.ListDecisionsRequest{Action: d.Action, Limit: 100, IncludeReads: d.Reads}
	switch d.Effect {
	case "":
	case "allow":
		req.Effect = guardv1.Effect_EFFECT_ALLOW
	case "hold":
		req.Effect = guardv1.Effect_EFFECT_HOLD
	case "deny":
		req.Effect = guardv1.Effect_EFFECT_DENY
	default:
		c.fail(w, r, s, http.StatusBadRequest, "effect: want allow, hold or deny")
		return
	}
	n := namesOf(r)
	if d.Group != "" {
		// A name nobody's group carries is said so, never an empty log.
		if req.Group = n.groupID(d.Group); n != nil && n.groups[req.Group] == nil {
			c.fail(w, r, s, http.StatusBadRequest, "group: no group you can read is called or numbered "+strconv.Quote(d.Group))
			return
		}
	}
	switch d.Actor {
	case "", "agent", "host", "system":
		req.Actor = d.Actor
	default:
		if req.Actor = n.userID(d.Actor); !strings.Contains(req.Actor, ":") {
			c.fail(w, r, s, http.StatusBadRequest, "actor: no user is called "+strconv.Quote(d.Actor)+" (a user's name or id, or agent, host or system)")
			return
		}
	}
	if d.Since != "" {
		t, err := sinceTime(d.Since, time.Now())
		if err != nil {
			c.fail(w, r, s, http.StatusBadRequest, "since: "+err.Error())
			return
		}
		req.Since = timestamppb.New(t)
	}
	resp, err := call[*guardv1.ListDecisionsResponse](c, r, s, guardv1.Registry_ListDecisions_FullMethodName, req)
	if err != nil {
		c.failRPC(w, r, s, err)
		return
	}
	d.Decisions = resp.GetDecisions()
	c.render(w, r, http.StatusOK, "decisions", s, "Decisions", d)
}

// sinceTime reads a filter's time: a duration ago (90m, 24h) or RFC 3339.
func sinceTime(v string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q: want a duration ago (90m, 24h) or an RFC 3339 time", v)
	}
	return t, nil
}

// decisionData is a decision's "why" page: the row, and for the hold it
// made and the grant it used, whether this reader may open them (a link
// only to a page the reader may see; else the words say why not).
type decisionData struct {
	*guardv1.DecisionRecord
	HoldOpen, GrantOpen bool
}

func (c *Console) decisionPage(w http.ResponseWriter, r *http.Request, s *session) {
	resp, err := call[*guardv1.GetDecisionResponse](c, r, s, guardv1.Registry_GetDecision_FullMethodName,
		&guardv1.GetDecisionRequest{Id: r.PathValue("id")})
	if err != nil {
		c.failRPC(w, r, s, err)
		return
	}
	d := decisionData{DecisionRecord: resp.GetDecision()}
	d.HoldOpen = c.mayOpenHold(r, s, d.GetHoldId())
	d.GrantOpen = c.mayOpenHold(r, s, d.GetGrant())
	title := "Why " + d.GetAction() + " was " + effectPast(d.GetEffect())
	c.render(w, r, http.StatusOK, "decision", s, title, d)
}

// mayOpenHold says whether the hold's page would open for this reader: a
// hold shows to who may resolve it (Approvals.Get says).
func (c *Console) mayOpenHold(r *http.Request, s *session, id string) bool {
	if id == "" {
		return false
	}
	_, err := call[*guardv1.GetResponse](c, r, s, guardv1.Approvals_Get_FullMethodName, &guardv1.GetRequest{Id: id})
	return err == nil
}
