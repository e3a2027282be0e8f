package console

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// The resolved holds page: what was decided, next to Pending — the holds
// this user may resolve that are no longer pending, filtered by group,
// outcome, who resolved them and since when (Approvals.List, as `ncl
// approvals list --resolved` asks).

type resolvedData struct {
	Holds                      []*guardv1.Hold
	Group, Outcome, Who, Since string // as typed
	Outcomes                   []string
}

// resolvedOutcomes are the statuses a resolved hold may have.
var resolvedOutcomes = map[string]guardv1.HoldStatus{
	"approved": guardv1.HoldStatus_HOLD_STATUS_APPROVED,
	"rejected": guardv1.HoldStatus_HOLD_STATUS_REJECTED,
	"expired":  guardv1.HoldStatus_HOLD_STATUS_EXPIRED,
	"swept":    guardv1.HoldStatus_HOLD_STATUS_SWEPT,
}

func (c *Console) resolvedPage(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	d := resolvedData{Group: strings.TrimSpace(q.Get("group")), Outcome: q.Get("outcome"), Who: strings.TrimSpace(q.Get("who")),
		Since: strings.TrimSpace(q.Get("since")), Outcomes: []string{"approved", "rejected", "expired", "swept"}}
	req := &guardv1.ListRequest{Resolved: true, EligibleForMe: true, Limit: 200}
	if d.Outcome != "" {
		st, ok := resolvedOutcomes[d.Outcome]
		if !ok {
			c.fail(w, r, s, http.StatusBadRequest, "outcome: want approved, rejected, expired or swept")
			return
		}
		req.Status = st
	}
	n := namesOf(r)
	if d.Group != "" {
		if req.AgentGroupId = n.groupID(d.Group); n != nil && n.groups[req.AgentGroupId] == nil {
			c.fail(w, r, s, http.StatusBadRequest, "group: no group you can read is called or numbered "+strconv.Quote(d.Group))
			return
		}
	}
	if d.Who != "" {
		if req.Resolver = n.userID(d.Who); !strings.Contains(req.Resolver, ":") {
			c.fail(w, r, s, http.StatusBadRequest, "who: no user is called "+strconv.Quote(d.Who)+" (a user's name or id)")
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
	resp, err := call[*guardv1.ListResponse](c, r, s, guardv1.Approvals_List_FullMethodName, req)
	if err != nil {
		c.failRPC(w, r, s, err)
		return
	}
	d.Holds = resp.GetHolds()
	c.render(w, r, http.StatusOK, "resolved", s, "Resolved holds", d)
}
