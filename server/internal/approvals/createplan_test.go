package approvals

import (
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// planHold on its own: the row a hold request and what was read make.
func TestPlanHold(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ann := candidate{id: "slack:ann", dms: []string{"slack"}}
	bob := candidate{id: "telegram:bob", dms: []string{"telegram"}}
	cid := candidate{id: "telegram:cid"} // no known DM
	chain := holdAnchor{rule: ruleAdminsOfScope, groupID: "ag_1"}
	cases := []struct {
		name      string
		req       CreateRequest
		a         holdAnchor
		ap        approvers
		ttl       time.Duration
		check     func(t *testing.T, p holdPlan)
		refusesAs string
	}{
		{name: "delivered to the first with a DM", req: CreateRequest{Kind: "k"}, a: chain, ap: approvers{candidates: []candidate{cid, bob, ann}, required: 1},
			check: func(t *testing.T, p holdPlan) {
				want(t, "delivered to", p.deliveredTo, "telegram:bob")
				want(t, "also delivered", len(p.alsoDelivered), 0)
				want(t, "approver user", p.approverUser, "") // not recorded unless asked
			}},
		{name: "the origin's channel first", req: CreateRequest{Kind: "k"}, a: holdAnchor{rule: ruleAdminsOfScope, origin: "slack"},
			ap:    approvers{candidates: []candidate{bob, ann}, required: 1},
			check: func(t *testing.T, p holdPlan) { want(t, "delivered to", p.deliveredTo, "slack:ann") }},
		{name: "nobody with a DM: undelivered", req: CreateRequest{Kind: "k"}, a: chain, ap: approvers{candidates: []candidate{cid}, required: 1},
			check: func(t *testing.T, p holdPlan) { want(t, "delivered to", p.deliveredTo, "") }},
		{name: "a quorum's card goes to every approver with a DM", req: CreateRequest{Kind: "k"}, a: chain,
			ap: approvers{candidates: []candidate{bob, cid, ann}, required: 2},
			check: func(t *testing.T, p holdPlan) {
				want(t, "delivered to", p.deliveredTo, "telegram:bob")
				want(t, "also delivered", slices.Equal(p.alsoDelivered, []string{"slack:ann"}), true)
				want(t, "required", p.required, 2)
			}},
		{name: "the delivered-to approver recorded when asked", req: CreateRequest{Kind: "sender_admit", RecordDeliveredTo: true}, a: chain,
			ap:    approvers{candidates: []candidate{bob}, required: 1},
			check: func(t *testing.T, p holdPlan) { want(t, "approver user", p.approverUser, "telegram:bob") }},
		{name: "a named delivered-to approver stays", req: CreateRequest{Kind: "k", RecordDeliveredTo: true},
			a: holdAnchor{rule: ruleAdminsOfScope, namedDeliv: "slack:ann"}, ap: approvers{candidates: []candidate{bob}, required: 1},
			check: func(t *testing.T, p holdPlan) { want(t, "approver user", p.approverUser, "slack:ann") }},
		{name: "an exclusive rule names its user", req: CreateRequest{Kind: "a2a_message_gate"},
			a:  holdAnchor{rule: ruleExclusive, exclusiveID: "slack:ann", alsoIDs: []string{"telegram:bob"}},
			ap: approvers{candidates: []candidate{ann, bob}, required: 1},
			check: func(t *testing.T, p holdPlan) {
				want(t, "approver user", p.approverUser, "slack:ann")
				want(t, "rule", p.rule, ruleExclusive)
				want(t, "also approvers", slices.Equal(p.alsoApprovers, []string{"telegram:bob"}), true)
			}},
		{name: "the default TTL", req: CreateRequest{Kind: "k"}, a: chain, ap: approvers{required: 1}, ttl: time.Hour,
			check: func(t *testing.T, p holdPlan) { want(t, "expires", *p.expires, now.Add(time.Hour)) }},
		{name: "its own expiry wins", req: CreateRequest{Kind: "k", ExpiresAt: now.Add(time.Minute)}, a: chain, ap: approvers{required: 1}, ttl: time.Hour,
			check: func(t *testing.T, p holdPlan) { want(t, "expires", *p.expires, now.Add(time.Minute)) }},
		{name: "no TTL: no expiry", req: CreateRequest{Kind: "k"}, a: chain, ap: approvers{required: 1},
			check: func(t *testing.T, p holdPlan) { want(t, "expires", p.expires == nil, true) }},
		{name: "the default options, scope group, empty JSON", req: CreateRequest{Kind: "k"}, a: chain, ap: approvers{required: 1},
			check: func(t *testing.T, p holdPlan) {
				want(t, "options", string(p.options), `[{"label":"Approve","value":"approve"},{"label":"Reject","value":"reject"},{"label":"Reject with reason…","value":"reject_with_reason"}]`)
				want(t, "scope", p.scope, "group")
				want(t, "payload", string(p.payload), "{}")
				want(t, "requester", string(p.requester), "{}")
				want(t, "resource", p.resource != nil && len(p.resource) == 0, true)
			}},
		{name: "its own options, payload and scope", a: chain, ap: approvers{required: 1},
			req: CreateRequest{Kind: "k", Scope: guardv1.ApproverScope_APPROVER_SCOPE_GLOBAL, Options: []*guardv1.HoldOption{{Label: "New agent", Value: "new"}},
				Payload: &structpb.Struct{Fields: map[string]*structpb.Value{"to": structpb.NewStringValue("ag_2")}}, Resource: map[string]string{"to": "ag_2"}},
			check: func(t *testing.T, p holdPlan) {
				want(t, "options", string(p.options), `[{"label":"New agent","value":"new"}]`)
				want(t, "scope", p.scope, "global")
				want(t, "payload", string(p.payload), `{"to":"ag_2"}`)
				want(t, "resource", p.resource["to"], "ag_2")
			}},
		{name: "an unknown scope is refused", req: CreateRequest{Kind: "k", Scope: 42}, a: chain, ap: approvers{required: 1}, refusesAs: "scope"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := planHold(c.req, c.a, c.ap, "k/ag_1//key", c.ttl, now)
			if c.refusesAs != "" {
				if err == nil {
					t.Fatalf("planned %+v, want a refusal", p)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want(t, "dedup key", p.dedupKey, "k/ag_1//key")
			c.check(t, p)
		})
	}
}

func want[T comparable](t *testing.T, what string, got, w T) {
	t.Helper()
	if got != w {
		t.Fatalf("%s = %v, want %v", what, got, w)
	}
}
