package edge_test

import (
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/edge"
	"github.com/clawguard/clawguard/server/internal/rpcdecl"
)

// BenchmarkValidateDecide is the edge's cost for the hot request: an
// agent's a2a.send as decideload sends it, and one with a payload.
func BenchmarkValidateDecide(b *testing.B) {
	v, err := edge.New(rpcdecl.RequestTypes(rpcdecl.Services...)...)
	if err != nil {
		b.Fatal(err)
	}
	payload, _ := structpb.NewStruct(map[string]any{"apt": []any{"curl", "jq"}, "reason": "tools"})
	for _, c := range []struct {
		name string
		req  *guardv1.DecideRequest
	}{
		{"a2a.send", &guardv1.DecideRequest{Action: "a2a.send",
			Actor:    &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: "bench-1a2b3c4d-g1234", SessionId: "bench-1a2b3c4d-s1234"}}},
			Resource: map[string]string{"to": "bench-1a2b3c4d-g4321"}}},
		{"install_packages", &guardv1.DecideRequest{Action: "self_mod.install_packages", Payload: payload,
			Actor: &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: "bench-1a2b3c4d-g1234", SessionId: "bench-1a2b3c4d-s1234"}}}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := v.Validate(c.req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
