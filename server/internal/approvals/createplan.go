package approvals

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
)

// holdPlan is a hold about to be made, as its row stores it: what planHold
// decides from the request and what was read, and what createTx writes.
type holdPlan struct {
	kind, catalogAction string
	payload, requester  []byte // JSON
	sessionID, groupID  string // the anchor group
	rule, approverUser  string // the rule's columns (ruleOf reads them back)
	scope, dedupKey     string
	expires             *time.Time
	title, question     string
	options             []byte // JSON of holdOption
	deliveredTo, origin string // "" when no eligible approver has a known DM
	deliveryAction      string
	sweptOnRestart      bool
	required            int
	alsoApprovers       []string // an exclusive rule's further named approvers
	resource            map[string]string
	alsoDelivered       []string // who else gets the card of a quorum
	escalation          EscalationPlan
}

// planHold is the pure part of creating a hold: from the request, who it
// is for (a) and who may approve it (ap), the row. It picks whom the card
// is delivered to (the first candidate with a known DM, preferring the
// origin channel type) and, for a quorum, who else gets it; records the
// delivered-to approver of an admin-chain hold that asks for it; gives the
// hold the default TTL (defaultTTL, from now) unless it names an expiry, and
// the default options unless it names its own.
func planHold(req CreateRequest, a holdAnchor, ap approvers, dedupKey string, defaultTTL time.Duration, now time.Time) (holdPlan, error) {
	p := holdPlan{kind: req.Kind, catalogAction: req.CatalogAction, sessionID: req.SessionID, groupID: a.groupID,
		rule: a.rule, dedupKey: dedupKey, title: req.Title, question: req.Question, origin: a.origin,
		deliveryAction: req.DeliveryAction, sweptOnRestart: req.SweptOnRestart, required: ap.required,
		alsoApprovers: orEmpty(a.alsoIDs), escalation: ap.plan}
	p.deliveredTo = pickDelivery(ap.candidates, a.origin)
	// A quorum needs more than one approver to see the card: every other
	// eligible approver with a known DM gets it too.
	if ap.required > 1 {
		for _, c := range ap.candidates {
			if c.id != p.deliveredTo && len(c.dms) > 0 {
				p.alsoDelivered = append(p.alsoDelivered, c.id)
			}
		}
	}
	p.alsoDelivered = orEmpty(p.alsoDelivered)
	p.approverUser = a.exclusiveID
	if a.rule == ruleAdminsOfScope {
		p.approverUser = a.namedDeliv
		if p.approverUser == "" && req.RecordDeliveredTo {
			p.approverUser = p.deliveredTo
		}
	}
	expires := req.ExpiresAt
	if expires.IsZero() && defaultTTL > 0 {
		expires = now.Add(defaultTTL)
	}
	p.expires = nullTime(expires)
	var err error
	p.payload, p.requester = []byte("{}"), []byte("{}")
	if req.Payload != nil {
		if p.payload, err = protojson.Marshal(req.Payload); err != nil {
			return p, fmt.Errorf("payload: %w", err)
		}
	}
	if req.Requester != nil {
		if p.requester, err = protojson.Marshal(req.Requester); err != nil {
			return p, fmt.Errorf("requester: %w", err)
		}
	}
	opts := req.Options
	if len(opts) == 0 {
		opts = DefaultOptions
	}
	optRows := make([]holdOption, 0, len(opts))
	for _, o := range opts {
		optRows = append(optRows, holdOption{Label: o.GetLabel(), Value: o.GetValue()})
	}
	p.options, _ = json.Marshal(optRows)
	if p.scope, err = scopeWord(req.Scope); err != nil {
		return p, err
	}
	p.resource = req.Resource
	if req.Resource == nil {
		p.resource = map[string]string{}
	}
	return p, nil
}

// pickDelivery is the first candidate with a known DM on the origin
// channel type, else the first candidate with any known DM, else "".
func pickDelivery(candidates []candidate, origin string) string {
	if origin != "" {
		for _, c := range candidates {
			if slices.Contains(c.dms, origin) {
				return c.id
			}
		}
	}
	for _, c := range candidates {
		if len(c.dms) > 0 {
			return c.id
		}
	}
	return ""
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
