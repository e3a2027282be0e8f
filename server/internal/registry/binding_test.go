package registry_test

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// A citation names session and action; the payload applied must still be
// the one decided. With the real guard: an ALLOW won with an approved
// install_packages grant cannot install other packages.
func TestApplyActionAppliesOnlyTheApprovedPayload(t *testing.T) {
	t.Parallel()
	f := setup(t)
	if _, err := f.srv.Pool.Exec(ctxT(t), `INSERT INTO holds (id, kind, payload, session_id, agent_group_id, status, resolved_at)
		VALUES ('h-pkgs', 'install_packages', '{"apt":["curl"]}'::jsonb, $1, $2, 'approved', now())`, f.sess.GetId(), f.group); err != nil {
		t.Fatal(err)
	}
	asAgent := testserver.ClientsFor(f.srv.Conn(t, f.r.token, f.sess.GetId()))
	approved := map[string]any{"apt": []any{"curl"}}
	res, err := asAgent.Guard.Decide(ctxT(t), &guardv1.DecideRequest{Action: "self_mod.install_packages", Payload: payload(t, approved), Grant: "h-pkgs"})
	if err != nil || res.GetDecision().GetEffect() != guardv1.Effect_EFFECT_ALLOW {
		t.Fatalf("replay with the grant: %v (%v), want ALLOW", res.GetDecision(), err)
	}
	_, err = f.apply(t, res.GetDecisionId(), "self_mod.install_packages", map[string]any{"apt": []any{"curl", "evil-tools"}}, nil)
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("apply another package list with the approval's ALLOW: %v, want PermissionDenied", err)
	}
	var apt []string
	if err := f.srv.Pool.QueryRow(ctxT(t), `SELECT COALESCE((SELECT apt_packages FROM container_configs WHERE agent_group_id = $1), '{}')`, f.group).Scan(&apt); err != nil || len(apt) != 0 {
		t.Fatalf("apt packages after the refused apply = %v (%v), want none", apt, err)
	}
	// The refusal did not use the citation up: the approved list applies.
	if _, err := f.apply(t, res.GetDecisionId(), "self_mod.install_packages", approved, nil); err != nil {
		t.Fatalf("apply the approved payload: %v", err)
	}
}

// An a2a ALLOW for an ungated target cannot be spent on a target whose
// message policy needs an approval, nor aimed elsewhere through resource.to.
func TestApplyA2ASendStaysOnTheDecidedTarget(t *testing.T) {
	t.Parallel()
	f := setup(t)
	open, gated := group(t, f.srv, "open", ""), group(t, f.srv, "gated", "")
	if _, err := f.srv.Pool.Exec(ctxT(t), `INSERT INTO users (id) VALUES ('tg:dana');
		INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) VALUES ('`+f.group+`', 'open', '`+open+`'), ('`+f.group+`', 'gated', '`+gated+`');
		INSERT INTO agent_message_policies (from_agent_group_id, to_agent_group_id, approver_user_id) VALUES ('`+f.group+`', '`+gated+`', 'tg:dana')`); err != nil {
		t.Fatal(err)
	}
	asAgent := testserver.ClientsFor(f.srv.Conn(t, f.r.token, f.sess.GetId()))
	res, err := asAgent.Guard.Decide(ctxT(t), &guardv1.DecideRequest{Action: "a2a.send",
		Resource: map[string]string{"from": f.group, "to": open}, Payload: payload(t, map[string]any{"to": open, "text": "hi"})})
	if err != nil || res.GetDecision().GetEffect() != guardv1.Effect_EFFECT_ALLOW {
		t.Fatalf("send to the open target: %v (%v), want ALLOW", res.GetDecision(), err)
	}
	d := res.GetDecisionId()
	if _, err := f.apply(t, d, "a2a.send", map[string]any{"to": gated, "text": "unreviewed"}, map[string]string{"to": gated}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("spend the open target's ALLOW on the gated target: %v, want PermissionDenied", err)
	}
	if _, err := f.apply(t, d, "a2a.send", map[string]any{"to": open, "text": "unreviewed"}, map[string]string{"to": gated}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("resource.to other than the payload's target: %v, want InvalidArgument", err)
	}
	var pushes int
	if err := f.srv.Pool.QueryRow(ctxT(t), `SELECT count(*) FROM runner_pushes p JOIN sessions s ON s.id = p.session_id WHERE s.agent_group_id = $1`, gated).Scan(&pushes); err != nil || pushes != 0 {
		t.Fatalf("pushes to the gated group = %d (%v), want 0", pushes, err)
	}
	if _, err := f.apply(t, d, "a2a.send", map[string]any{"to": open, "text": "hi"}, map[string]string{"to": open}); err != nil {
		t.Fatalf("send to the decided target: %v", err)
	}
}

// A message policy rolled out in audit mode lets the send run: the guard's
// audit ALLOW applies without an approval — but only to a pair whose gate is
// still relaxed when it applies: not to another gated target, and not after
// the operator switched the policy to enforce.
func TestApplyA2ASendInAuditModeRunsOnlyWhileRelaxed(t *testing.T) {
	t.Parallel()
	f := setup(t)
	audited, enforced := group(t, f.srv, "audited", ""), group(t, f.srv, "enforced", "")
	if _, err := f.srv.Pool.Exec(ctxT(t), `INSERT INTO users (id) VALUES ('tg:dana');
		INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) VALUES ('`+f.group+`', 'audited', '`+audited+`'), ('`+f.group+`', 'enforced', '`+enforced+`');
		INSERT INTO agent_message_policies (from_agent_group_id, to_agent_group_id, approver_user_id, mode) VALUES
			('`+f.group+`', '`+audited+`', 'tg:dana', 'audit'), ('`+f.group+`', '`+enforced+`', 'tg:dana', '')`); err != nil {
		t.Fatal(err)
	}
	asAgent := testserver.ClientsFor(f.srv.Conn(t, f.r.token, f.sess.GetId()))
	send := func() string {
		res, err := asAgent.Guard.Decide(ctxT(t), &guardv1.DecideRequest{Action: "a2a.send",
			Resource: map[string]string{"to": audited}, Payload: payload(t, map[string]any{"to": audited, "text": "hi"})})
		if err != nil || res.GetDecision().GetEffect() != guardv1.Effect_EFFECT_ALLOW || res.GetDecision().GetMode() != "audit" {
			t.Fatalf("send under an audited policy: %v (%v), want an audit ALLOW", res.GetDecision(), err)
		}
		return res.GetDecisionId()
	}
	d := send()
	if _, err := f.apply(t, d, "a2a.send", map[string]any{"to": enforced, "text": "x"}, map[string]string{"to": enforced}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("spend an audit ALLOW on an enforced pair: %v, want PermissionDenied", err)
	}
	if _, err := f.apply(t, d, "a2a.send", map[string]any{"to": audited, "text": "hi"}, map[string]string{"to": audited}); err != nil {
		t.Fatalf("apply the audited send: %v", err)
	}
	d = send()
	if _, err := f.srv.Pool.Exec(ctxT(t), `UPDATE agent_message_policies SET mode = 'enforce' WHERE to_agent_group_id = $1`, audited); err != nil {
		t.Fatal(err)
	}
	if _, err := f.apply(t, d, "a2a.send", map[string]any{"to": audited, "text": "hi"}, map[string]string{"to": audited}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("apply an audit ALLOW after the switch to enforce: %v, want PermissionDenied", err)
	}
}
