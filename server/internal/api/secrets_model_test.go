package api_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

const providerKey = "sk-ant-api03-PROVIDER-KEY-0123456789"

// A model provider's credential is write-only (issue 44 through issue 41's
// one mechanism): no read of any principal carries it — the operator's, an
// owner's, an agent's (group or global scope), a bridge's, the runner's
// own lists — but the runner's GetModelRoute for a session placed on it,
// which an agent it asserts is refused.
func TestModelProviderCredentialIsReadByNobodyButTheRunnersRoute(t *testing.T) {
	w := newSecretsWorld(t)
	ctx := context.Background()
	key := providerKey
	set, err := w.operator.Registry.SetModelProvider(ctx, &guardv1.SetModelProviderRequest{Name: "anthropic",
		Kind: guardv1.ModelProviderKind_MODEL_PROVIDER_KIND_ANTHROPIC, Credential: &key})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.operator.Registry.SetModelProviders(ctx, &guardv1.SetModelProvidersRequest{Group: "gA", Providers: []string{"anthropic"}}); err != nil {
		t.Fatal(err)
	}
	never := func(who string, m proto.Message, err error) {
		t.Helper()
		if err != nil && status.Code(err) != codes.PermissionDenied && status.Code(err) != codes.NotFound {
			t.Fatalf("%s: %v", who, err)
		}
		b, _ := protojson.Marshal(m)
		if strings.Contains(string(b), providerKey) || (err != nil && strings.Contains(err.Error(), providerKey)) {
			t.Errorf("%s carries the provider's credential", who)
		}
	}
	never("SetModelProvider's answer", set, nil)
	readers := map[string]guardv1.RegistryClient{"operator": w.operator.Registry, "owner": w.owner.Registry, "agent A": w.agentA.Registry,
		"agent G": w.agentG.Registry, "bridge": w.bridge.Registry, "runner": w.r1.Registry}
	for name, c := range readers {
		l, err := c.ListModelProviders(ctx, &guardv1.ListModelProvidersRequest{})
		never(name+"'s ListModelProviders", l, err)
		p, err := c.GetModelPolicy(ctx, &guardv1.GetModelPolicyRequest{Group: "gA"})
		never(name+"'s GetModelPolicy", p, err)
	}
	route, err := w.r1.Registry.GetModelRoute(ctx, &guardv1.GetModelRouteRequest{SessionId: "sA", Kind: guardv1.ModelProviderKind_MODEL_PROVIDER_KIND_ANTHROPIC})
	if err != nil || route.GetCredential() != providerKey {
		t.Fatalf("the runner's own route: %v, %v (its credential in clear: %v)", route, err, route.GetCredential() == providerKey)
	}
	for name, c := range map[string]guardv1.RegistryClient{"agent A": w.agentA.Registry, "agent G": w.agentG.Registry, "owner": w.owner.Registry,
		"operator": w.operator.Registry, "bridge": w.bridge.Registry} {
		r, err := c.GetModelRoute(ctx, &guardv1.GetModelRouteRequest{SessionId: "sA", Kind: guardv1.ModelProviderKind_MODEL_PROVIDER_KIND_ANTHROPIC})
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s's GetModelRoute: %v, %v; want PermissionDenied", name, r, err)
		}
		never(name+"'s GetModelRoute", r, err)
	}
	// An agent asking to see the group (cli_request → GetGroup) reads no credential either.
	g, err := w.agentA.Registry.GetGroup(ctx, &guardv1.GetGroupRequest{Id: "gA"})
	never("agent A's GetGroup", g, err)
}
