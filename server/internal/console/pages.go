package console

import (
	"google.golang.org/protobuf/types/known/durationpb"

	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/clawguard/clawguard/server/internal/store"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/clawguard/clawguard/proto/click"
	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/holdview"
	"github.com/clawguard/clawguard/server/internal/approvals"
)

// ---- pending holds ----

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
	Hold       *guardv1.Hold
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
	ctx := r.Context()
	resp, err := call[*guardv1.GetResponse](c, r, s, guardv1.Approvals_Get_FullMethodName, &guardv1.GetRequest{Id: r.PathValue("id")})
	if err != nil {
		c.failRPC(w, r, s, err)
		return
	}
	h := resp.GetHold()
	d := holdData{Hold: h}
	// The buttons are there exactly when Resolve would accept the click.
	if h.GetStatus() == guardv1.HoldStatus_HOLD_STATUS_PENDING {
		if d.CanResolve, err = approvals.MayResolve(ctx, c.d.Pool, h.GetApproverRule(), h.GetApproverScope(), s.UserID); err != nil {
			c.failRPC(w, r, s, store.Fault("approver rule", err))
			return
		}
	}
	d.CanStand = d.CanResolve && c.d.StandingGrantMax > 0 && h.GetApproverScope() != guardv1.ApproverScope_APPROVER_SCOPE_GLOBAL &&
		h.GetCatalogAction() != "" && h.GetAgentGroupId() != "" && h.GetRequester().GetAgent() != nil
	for _, a := range h.GetApprovals() {
		if a.GetIneligible() {
			continue
		}
		d.Counted++
		if a.GetUserId() == s.UserID {
			d.Approved = true
		}
	}
	d.Waiting = h.GetStatus() == guardv1.HoldStatus_HOLD_STATUS_APPROVED && !h.GetConsumed() && h.GetCatalogAction() != "" &&
		h.GetResolvedAt() != nil && time.Since(h.GetResolvedAt().AsTime()) < 10*time.Minute
	d.Deciders, d.DecidersNote = c.deciders(r, s, h)
	for i, u := range d.Deciders {
		d.Deciders[i] = userLabel(namesOf(r).book(), u)
	}
	d.Outcome, d.PayloadHeading = outcomeWords(namesOf(r).book(), h, time.Now())
	d.Grants = c.holdGrants(r, s, h)
	// The notice is this approver's own: anyone else's page says nothing.
	if r.URL.Query().Get("said") == saidAlready && (holdview.Approved(h, s.UserID) || h.GetResolver() == s.UserID) {
		d.Said = "Already approved; " + holdview.Progress(h, "") + ": your click changed nothing."
		if h.GetStatus() == guardv1.HoldStatus_HOLD_STATUS_PENDING {
			d.Said = "Already approved; " + holdview.Progress(h, "") + " — waiting for the other approvals."
		}
	}
	// The hold is visible to this user (Get said so): its history is too.
	rows, err := c.d.Pool.Query(ctx, `SELECT type, COALESCE(outcome, ''), resolver, created_at FROM hold_events
		WHERE hold_id = $1 ORDER BY cursor`, h.GetId())
	if err == nil {
		for rows.Next() {
			var e holdEvent
			if err = rows.Scan(&e.Type, &e.Outcome, &e.Resolver, &e.At); err != nil {
				break
			}
			d.Events = append(d.Events, e)
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	if err != nil {
		c.failRPC(w, r, s, store.Fault("the hold's events", err))
		return
	}
	// The decisions that made it and the replays that used it, each read
	// through GetDecision (so read scoping applies to them as well).
	ids, err := c.holdDecisionIDs(r, h.GetId())
	if err != nil {
		c.failRPC(w, r, s, store.Fault("the hold's decisions", err))
		return
	}
	for _, id := range ids {
		dr, err := call[*guardv1.GetDecisionResponse](c, r, s, guardv1.Registry_GetDecision_FullMethodName, &guardv1.GetDecisionRequest{Id: id})
		if err == nil {
			d.Decisions = append(d.Decisions, dr.GetDecision())
		}
	}
	c.render(w, r, http.StatusOK, "hold", s, h.GetTitle(), d)
}

func (c *Console) holdDecisionIDs(r *http.Request, holdID string) ([]string, error) {
	rows, err := c.d.Pool.Query(r.Context(), `SELECT id FROM (
		SELECT id, at FROM decisions WHERE hold_id = $1 AND hold_id <> ''
		UNION SELECT id, at FROM decisions WHERE grant_id = $1 AND grant_id <> '') d ORDER BY at, id LIMIT 50`, holdID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
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

func (c *Console) resolve(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	req := &guardv1.ResolveRequest{Id: id, Reason: strings.TrimSpace(r.PostFormValue("reason")), Choice: r.PostFormValue("choice")}
	switch r.PostFormValue("outcome") {
	case "approve":
		req.Outcome = guardv1.Outcome_OUTCOME_APPROVE
		// "Once" (empty), "session", or a duration: a standing grant,
		// capped and refused (global scope, step-up) by the server.
		switch st := r.PostFormValue("standing"); st {
		case "":
		case "session":
			req.StandingSession = true
		default:
			d, err := time.ParseDuration(st)
			if err != nil || d <= 0 {
				c.fail(w, r, s, http.StatusBadRequest, "standing: want once, session or a duration such as 1h")
				return
			}
			req.StandingFor = durationpb.New(d)
		}
	case "reject":
		req.Outcome = guardv1.Outcome_OUTCOME_REJECT
	default:
		c.fail(w, r, s, http.StatusBadRequest, "outcome: want approve or reject")
		return
	}
	// What the hold was before this click: a second approval by the same
	// approver (a double submit, a stale page) is said to be one.
	var before *guardv1.Hold
	if req.Outcome == guardv1.Outcome_OUTCOME_APPROVE {
		if g, err := call[*guardv1.GetResponse](c, r, s, guardv1.Approvals_Get_FullMethodName, &guardv1.GetRequest{Id: id}); err == nil {
			before = g.GetHold()
		}
	}
	// A click the server cannot take now (the database restarting, out of
	// disk) is asked again after its hint, for a bounded time, rather than
	// shown as a failure; an attempt whose answer was lost is recognised.
	res, err := click.Resolve(r.Context(), click.Calls{
		Resolve: func(ctx context.Context, req *guardv1.ResolveRequest) (*guardv1.ResolveResponse, error) {
			return backendCall[*guardv1.ResolveResponse](ctx, c, s, guardv1.Approvals_Resolve_FullMethodName, req)
		},
		Get: func(ctx context.Context, id string) (*guardv1.Hold, error) {
			g, err := backendCall[*guardv1.GetResponse](ctx, c, s, guardv1.Approvals_Get_FullMethodName, &guardv1.GetRequest{Id: id})
			return g.GetHold(), err
		},
	}, req, click.Options{For: clickRetryFor, Clicker: s.UserID, OnRetry: func(err error, wait time.Duration) {
		c.d.Log.Warn("console click not taken now; asking again", "user", s.UserID, "hold", id, "err", err, "in", wait)
	}})
	mine := before != nil && (holdview.Approved(before, s.UserID) ||
		before.GetStatus() == guardv1.HoldStatus_HOLD_STATUS_APPROVED && before.GetResolver() == s.UserID)
	if err != nil {
		if mine && status.Code(err) == codes.FailedPrecondition {
			// This approver's approval resolved it before: the click stands.
			http.Redirect(w, r, "/holds/"+id+"?said="+saidAlready, http.StatusSeeOther)
			return
		}
		c.failRPC(w, r, s, err)
		return
	}
	if res.Repeated {
		c.d.Log.Info("console click: an earlier attempt had resolved it", "user", s.UserID, "hold", id)
	}
	c.d.Log.Info("console resolve", "user", s.UserID, "hold", id, "outcome", r.PostFormValue("outcome"))
	if mine && !res.Repeated {
		// The server records an approver once and answers as before.
		http.Redirect(w, r, "/holds/"+id+"?said="+saidAlready, http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/holds/"+id, http.StatusSeeOther)
}

// saidAlready marks the hold page shown after a click that found this
// approver's approval already on record.
const saidAlready = "already"

// outcomeWords says what happened to a hold that is no longer pending, and
// what its payload is now (for a pending one: what will run).
func outcomeWords(n holdview.Names, h *guardv1.Hold, now time.Time) (outcome, heading string) {
	by := userLabel(n, h.GetResolver())
	at := since(h.GetResolvedAt(), now)
	switch h.GetStatus() {
	case guardv1.HoldStatus_HOLD_STATUS_PENDING:
		return "", "The exact payload that will run"
	case guardv1.HoldStatus_HOLD_STATUS_APPROVED:
		outcome = "Approved by " + by + " " + at
		switch {
		case h.GetUnappliedReason() != "":
			outcome += "; not carried out: " + h.GetUnappliedReason()
			return outcome + ".", "The payload that was approved (it did not run)"
		case h.GetConsumed():
			return outcome + "; its replay used the grant.", "The payload that was approved and replayed"
		case h.GetCatalogAction() == "":
			return outcome + ".", "The payload that was approved"
		}
		return outcome + "; waiting for its replay.", "The payload that was approved (its replay is on its way)"
	case guardv1.HoldStatus_HOLD_STATUS_REJECTED:
		outcome = "Rejected by " + by + " " + at
		if h.GetReason() != "" {
			outcome += ": “" + h.GetReason() + "”"
		}
		return outcome + ". Nothing ran.", "The payload that was rejected (it did not run)"
	case guardv1.HoldStatus_HOLD_STATUS_EXPIRED:
		return "Expired " + at + ": nobody decided in time. Nothing ran.", "The payload that was asked for (it did not run)"
	case guardv1.HoldStatus_HOLD_STATUS_SWEPT:
		return "Swept " + at + " when the server restarted. Nothing ran.", "The payload that was asked for (it did not run)"
	}
	return enumword.String(h.GetStatus()), "The payload"
}

// ---- the decision log and why ----

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

// ---- what-if ----

type whatifData struct {
	Actions                          []string
	Action, Actor, Resource, Payload string
	Answer                           *guardv1.DecideResponse
	Error                            string
	// Command is the `ncl explain` that asks the same question: every
	// field that changes the answer, as typed.
	Command string
}

func (c *Console) whatifForm(r *http.Request, s *session) whatifData {
	d := whatifData{}
	if cat, err := callAll[*guardv1.ListCatalogResponse](c, r, s, guardv1.Registry_ListCatalog_FullMethodName, &guardv1.ListCatalogRequest{}); err == nil {
		for _, e := range cat.GetEntries() {
			d.Actions = append(d.Actions, e.GetAction())
		}
	}
	return d
}

func (c *Console) whatifPage(w http.ResponseWriter, r *http.Request, s *session) {
	d := c.whatifForm(r, s)
	d.Action, d.Actor = "a2a.send", "agent:"
	c.render(w, r, http.StatusOK, "whatif", s, "What if", d)
}

func (c *Console) whatif(w http.ResponseWriter, r *http.Request, s *session) {
	d := c.whatifForm(r, s)
	d.Action = strings.TrimSpace(r.PostFormValue("action"))
	d.Actor = strings.TrimSpace(r.PostFormValue("actor"))
	d.Resource = r.PostFormValue("resource")
	d.Payload = strings.TrimSpace(r.PostFormValue("payload"))
	req, err := whatifRequest(d)
	if err != nil {
		d.Error = err.Error()
		c.render(w, r, http.StatusBadRequest, "whatif", s, "What if", d)
		return
	}
	// Groups and users by name or id, as ncl explain takes them.
	n := namesOf(r)
	if ag := req.GetActor().GetAgent(); ag != nil {
		ag.AgentGroupId = n.groupID(ag.GetAgentGroupId())
	}
	if hu := req.GetActor().GetHuman(); hu != nil {
		hu.UserId = n.userID(hu.GetUserId())
	}
	for _, k := range holdview.GroupResourceKeys[req.GetAction()] {
		if v, ok := req.Resource[k]; ok {
			req.Resource[k] = n.targetID(v, req.GetActor().GetAgent().GetAgentGroupId())
		}
	}
	d.Command = explainCommand(d)
	resp, err := call[*guardv1.DecideResponse](c, r, s, guardv1.Guard_Decide_FullMethodName, req)
	if err != nil {
		d.Error = status.Convert(err).Message()
		code := http.StatusBadRequest
		if status.Code(err) == codes.PermissionDenied {
			code = http.StatusForbidden
		}
		c.render(w, r, code, "whatif", s, "What if", d)
		return
	}
	d.Answer = resp
	c.render(w, r, http.StatusOK, "whatif", s, "What if", d)
}

// whatifRequest reads the form the way `ncl explain` reads its flags.
func whatifRequest(d whatifData) (*guardv1.DecideRequest, error) {
	req := &guardv1.DecideRequest{Action: d.Action, DryRun: true, Resource: map[string]string{}}
	if d.Action == "" {
		return nil, fmt.Errorf("action: required (see the catalog)")
	}
	kind, rest, _ := strings.Cut(d.Actor, ":")
	switch kind {
	case "host":
		req.Actor = &guardv1.Actor{Kind: &guardv1.Actor_Host{Host: &guardv1.HostActor{}}}
	case "agent":
		group, sess, _ := strings.Cut(rest, ":")
		if group == "" {
			return nil, fmt.Errorf("actor: agent:<group>[:<session>] needs a group")
		}
		req.Actor = &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: group, SessionId: sess}}}
	case "human":
		if rest == "" {
			return nil, fmt.Errorf("actor: human:<user> needs a user, e.g. human:telegram:dana")
		}
		req.Actor = &guardv1.Actor{Kind: &guardv1.Actor_Human{Human: &guardv1.HumanActor{UserId: rest}}}
	default:
		return nil, fmt.Errorf("actor: want host, agent:<group>[:<session>] or human:<user>")
	}
	for _, line := range strings.FieldsFunc(d.Resource, func(r rune) bool { return r == '\n' || r == ',' }) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		if !ok || k == "" {
			return nil, fmt.Errorf("resource: %q is not key=value", line)
		}
		req.Resource[k] = v
	}
	if d.Payload != "" {
		var m map[string]any
		if err := json.Unmarshal([]byte(d.Payload), &m); err != nil {
			return nil, fmt.Errorf("payload: not a JSON object: %v", err)
		}
		p, err := structpb.NewStruct(m)
		if err != nil {
			return nil, fmt.Errorf("payload: %v", err)
		}
		req.Payload = p
	}
	return req, nil
}

// explainCommand is the ncl explain of a what-if form: the action, the
// actor, each resource pair and the payload, each quoted for a POSIX shell.
func explainCommand(d whatifData) string {
	parts := []string{"ncl", "explain", "--action", shellQuote(d.Action), "--actor", shellQuote(d.Actor)}
	for _, line := range strings.FieldsFunc(d.Resource, func(r rune) bool { return r == '\n' || r == ',' }) {
		if line = strings.TrimSpace(line); line != "" {
			parts = append(parts, "--resource", shellQuote(line))
		}
	}
	if d.Payload != "" {
		var b bytes.Buffer
		p := d.Payload
		if json.Compact(&b, []byte(p)) == nil {
			p = b.String()
		}
		parts = append(parts, "--payload", shellQuote(p))
	}
	return strings.Join(parts, " ")
}

// shellQuote leaves a plain word as it is and single-quotes anything else.
func shellQuote(s string) string {
	plain := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:=/@+,%", r)) {
			plain = false
			break
		}
	}
	if plain {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ---- read-only tables ----

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
