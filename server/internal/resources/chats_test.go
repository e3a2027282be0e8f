package resources_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

func TestMessagingGroupsAndWirings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, c := start(t)
	r := c.Registry
	g := must[*guardv1.CreateGroupResponse](t)(r.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: "g"})).GetGroup().GetId()

	m := must[*guardv1.CreateMessagingGroupResponse](t)(r.CreateMessagingGroup(ctx, &guardv1.CreateMessagingGroupRequest{
		ChannelType: "telegram", PlatformId: "-100", Name: "team", IsGroup: true})).GetMessagingGroup()
	if m.GetId()[:3] != "mg_" || m.GetUnknownSenderPolicy() != guardv1.SenderPolicy_SENDER_POLICY_STRICT || !m.GetIsGroup() || m.GetDenied() {
		t.Fatalf("created %v", m)
	}
	_, err := r.CreateMessagingGroup(ctx, &guardv1.CreateMessagingGroupRequest{ChannelType: "telegram", PlatformId: "-100"})
	wantCode(t, err, codes.AlreadyExists, "")
	_, err = r.CreateMessagingGroup(ctx, &guardv1.CreateMessagingGroupRequest{ChannelType: "telegram"})
	wantCode(t, err, codes.InvalidArgument, "platform_id")
	_, err = r.CreateMessagingGroup(ctx, &guardv1.CreateMessagingGroupRequest{ChannelType: "telegram", PlatformId: "1", UnknownSenderPolicy: 9})
	wantCode(t, err, codes.InvalidArgument, "unknown_sender_policy")

	up := must[*guardv1.UpdateMessagingGroupResponse](t)(r.UpdateMessagingGroup(ctx, &guardv1.UpdateMessagingGroupRequest{
		Id: m.GetId(), UnknownSenderPolicy: guardv1.SenderPolicy_SENDER_POLICY_REQUEST_APPROVAL})).GetMessagingGroup()
	if up.GetName() != "team" || up.GetUnknownSenderPolicy() != guardv1.SenderPolicy_SENDER_POLICY_REQUEST_APPROVAL {
		t.Fatalf("updated %v", up)
	}
	got := must[*guardv1.GetMessagingGroupResponse](t)(r.GetMessagingGroup(ctx, &guardv1.GetMessagingGroupRequest{Id: m.GetId()})).GetMessagingGroup()
	if got.GetUnknownSenderPolicy() != guardv1.SenderPolicy_SENDER_POLICY_REQUEST_APPROVAL {
		t.Fatalf("get %v", got)
	}
	if l := must[*guardv1.ListMessagingGroupsResponse](t)(r.ListMessagingGroups(ctx, &guardv1.ListMessagingGroupsRequest{})).GetMessagingGroups(); len(l) != 1 {
		t.Fatalf("list %v", l)
	}
	_, err = r.UpdateMessagingGroup(ctx, &guardv1.UpdateMessagingGroupRequest{Id: "mg_nope", Name: "x"})
	wantCode(t, err, codes.NotFound, "")

	w := must[*guardv1.CreateWiringResponse](t)(r.CreateWiring(ctx, &guardv1.CreateWiringRequest{MessagingGroup: m.GetId(), Group: g})).GetWiring()
	if w.GetId()[:3] != "wr_" || w.GetGroup() != g || w.GetMessagingGroup() != m.GetId() {
		t.Fatalf("wiring %v", w)
	}
	_, err = r.CreateWiring(ctx, &guardv1.CreateWiringRequest{MessagingGroup: m.GetId(), Group: g})
	wantCode(t, err, codes.AlreadyExists, "")
	_, err = r.CreateWiring(ctx, &guardv1.CreateWiringRequest{MessagingGroup: m.GetId(), Group: "ag_nope"})
	wantCode(t, err, codes.NotFound, "")
	_, err = r.CreateWiring(ctx, &guardv1.CreateWiringRequest{Group: g})
	wantCode(t, err, codes.InvalidArgument, "messaging_group")
	if l := must[*guardv1.ListWiringsResponse](t)(r.ListWirings(ctx, &guardv1.ListWiringsRequest{Group: g})).GetWirings(); len(l) != 1 || l[0].GetId() != w.GetId() {
		t.Fatalf("wirings %v", l)
	}
	if l := must[*guardv1.ListWiringsResponse](t)(r.ListWirings(ctx, &guardv1.ListWiringsRequest{MessagingGroup: "mg_other"})).GetWirings(); len(l) != 0 {
		t.Fatalf("filtered wirings %v", l)
	}
	must[*guardv1.DeleteWiringResponse](t)(r.DeleteWiring(ctx, &guardv1.DeleteWiringRequest{Id: w.GetId()}))
	_, err = r.DeleteWiring(ctx, &guardv1.DeleteWiringRequest{Id: w.GetId()})
	wantCode(t, err, codes.NotFound, "")

	must[*guardv1.DeleteMessagingGroupResponse](t)(r.DeleteMessagingGroup(ctx, &guardv1.DeleteMessagingGroupRequest{Id: m.GetId()}))
	_, err = r.GetMessagingGroup(ctx, &guardv1.GetMessagingGroupRequest{Id: m.GetId()})
	wantCode(t, err, codes.NotFound, "")
	_, err = r.DeleteMessagingGroup(ctx, &guardv1.DeleteMessagingGroupRequest{Id: m.GetId()})
	wantCode(t, err, codes.NotFound, "")
}

func TestPoliciesAndUserDms(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, c := start(t)
	r := c.Registry
	g := must[*guardv1.CreateGroupResponse](t)(r.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: "g"})).GetGroup().GetId()
	h := must[*guardv1.CreateGroupResponse](t)(r.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: "h"})).GetGroup().GetId()
	k := must[*guardv1.CreateGroupResponse](t)(r.CreateGroup(ctx, &guardv1.CreateGroupRequest{Name: "k"})).GetGroup().GetId()

	// Issue 41 item 5: a policy names users, or nobody could ever approve
	// its holds.
	for _, also := range [][]string{nil, {"tg:erin", "tg:farid"}} {
		_, err := r.SetPolicy(ctx, &guardv1.SetPolicyRequest{FromGroup: g, ToGroup: h, ApproverUserId: "tg:dana", AlsoApproverUserIds: also})
		wantCode(t, err, codes.InvalidArgument, "not a user")
	}
	for _, u := range []string{"tg:dana", "tg:eve"} {
		must[*guardv1.CreateUserResponse](t)(r.CreateUser(ctx, &guardv1.CreateUserRequest{Id: u}))
	}
	_, err := r.SetPolicy(ctx, &guardv1.SetPolicyRequest{FromGroup: g, ToGroup: h, ApproverUserId: "tg:dana", AlsoApproverUserIds: []string{"tg:erin"}, Approvals: 2})
	wantCode(t, err, codes.InvalidArgument, "tg:erin is not a user")
	p := must[*guardv1.SetPolicyResponse](t)(r.SetPolicy(ctx, &guardv1.SetPolicyRequest{FromGroup: g, ToGroup: h, ApproverUserId: "tg:dana"})).GetPolicy()
	if p.GetApproverUserId() != "tg:dana" {
		t.Fatalf("policy %v", p)
	}
	// Set replaces.
	p = must[*guardv1.SetPolicyResponse](t)(r.SetPolicy(ctx, &guardv1.SetPolicyRequest{FromGroup: g, ToGroup: h, ApproverUserId: "tg:eve"})).GetPolicy()
	if p.GetApproverUserId() != "tg:eve" {
		t.Fatalf("policy %v", p)
	}
	must[*guardv1.SetPolicyResponse](t)(r.SetPolicy(ctx, &guardv1.SetPolicyRequest{FromGroup: k, ToGroup: g, ApproverUserId: "tg:eve"}))
	must[*guardv1.SetPolicyResponse](t)(r.SetPolicy(ctx, &guardv1.SetPolicyRequest{FromGroup: h, ToGroup: k, ApproverUserId: "tg:eve"}))
	if l := must[*guardv1.ListPoliciesResponse](t)(r.ListPolicies(ctx, &guardv1.ListPoliciesRequest{Group: g})).GetPolicies(); len(l) != 2 {
		t.Fatalf("policies of g %v", l)
	}
	_, err = r.SetPolicy(ctx, &guardv1.SetPolicyRequest{FromGroup: g, ToGroup: "ag_nope", ApproverUserId: "tg:eve"})
	wantCode(t, err, codes.NotFound, "")
	_, err = r.SetPolicy(ctx, &guardv1.SetPolicyRequest{FromGroup: g, ToGroup: h})
	wantCode(t, err, codes.InvalidArgument, "approver_user_id")
	_, err = r.SetPolicy(ctx, &guardv1.SetPolicyRequest{ToGroup: h, ApproverUserId: "tg:eve"})
	wantCode(t, err, codes.InvalidArgument, "from_group")
	must[*guardv1.RemovePolicyResponse](t)(r.RemovePolicy(ctx, &guardv1.RemovePolicyRequest{FromGroup: g, ToGroup: h}))
	_, err = r.RemovePolicy(ctx, &guardv1.RemovePolicyRequest{FromGroup: g, ToGroup: h})
	wantCode(t, err, codes.NotFound, "")
	// Removed with either group: deleting g takes k→g, leaves h→k.
	must[*guardv1.DeleteGroupResponse](t)(r.DeleteGroup(ctx, &guardv1.DeleteGroupRequest{Id: g}))
	l := must[*guardv1.ListPoliciesResponse](t)(r.ListPolicies(ctx, &guardv1.ListPoliciesRequest{})).GetPolicies()
	if len(l) != 1 || l[0].GetFromGroup() != h {
		t.Fatalf("policies after delete %v", l)
	}
	exec(t, srv, `DELETE FROM agent_groups WHERE id = $1`, k) // the FK leg, without the resource's explicit delete
	if n := count(t, srv, `SELECT count(*) FROM agent_message_policies`); n != 0 {
		t.Fatalf("%d policies left after the target group went", n)
	}

	d := must[*guardv1.SetUserDmResponse](t)(r.SetUserDm(ctx, &guardv1.SetUserDmRequest{UserId: "tg:dana", ChannelType: "telegram", Address: "123"})).GetDm()
	if d.GetAddress() != "123" {
		t.Fatalf("dm %v", d)
	}
	d = must[*guardv1.SetUserDmResponse](t)(r.SetUserDm(ctx, &guardv1.SetUserDmRequest{UserId: "tg:dana", ChannelType: "telegram", Address: "456"})).GetDm()
	if d.GetAddress() != "456" {
		t.Fatalf("dm %v", d)
	}
	_, err = r.SetUserDm(ctx, &guardv1.SetUserDmRequest{UserId: "tg:nobody", ChannelType: "telegram", Address: "1"})
	wantCode(t, err, codes.NotFound, "")
	_, err = r.SetUserDm(ctx, &guardv1.SetUserDmRequest{UserId: "tg:dana", ChannelType: "telegram"})
	wantCode(t, err, codes.InvalidArgument, "address")
	if l := must[*guardv1.ListUserDmsResponse](t)(r.ListUserDms(ctx, &guardv1.ListUserDmsRequest{UserId: "tg:dana"})).GetDms(); len(l) != 1 || l[0].GetAddress() != "456" {
		t.Fatalf("dms %v", l)
	}
	must[*guardv1.RemoveUserDmResponse](t)(r.RemoveUserDm(ctx, &guardv1.RemoveUserDmRequest{UserId: "tg:dana", ChannelType: "telegram"}))
	_, err = r.RemoveUserDm(ctx, &guardv1.RemoveUserDmRequest{UserId: "tg:dana", ChannelType: "telegram"})
	wantCode(t, err, codes.NotFound, "")
}
