package main

import (
	"context"
	"fmt"

	openfgav1 "github.com/openfga/api/proto/openfga/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// The side-by-side run (-mode openfga) asks OpenFGA the questions the
// Clawguard runs ask Guard.Decide: may group a send to group b, where the
// allowed pairs are the fixture's destinations. In OpenFGA a destination is
// the tuple agent_group:b#sender@agent_group:a, and a check is
// Check(agent_group:a, sender, agent_group:b).
const fgaModel = `{"schema_version":"1.1","type_definitions":[
 {"type":"agent_group","relations":{"sender":{"this":{}}},
  "metadata":{"relations":{"sender":{"directly_related_user_types":[{"type":"agent_group"}]}}}}]}`

// fgaWriteMax is OpenFGA's default limit of tuples in one Write.
const fgaWriteMax = 100

type fgaStore struct{ storeID, modelID string }

// setupOpenFGA writes the fixture's destinations into a new OpenFGA store
// through its API (as an operator would), with the same pairs newFixture
// draws for Clawguard.
func setupOpenFGA(ctx context.Context, c config, n, dests int) (*fixture, error) {
	if n < 2 || dests < 1 || dests > n*(n-1)/2 {
		return nil, fmt.Errorf("-groups %d / -destinations %d: want at least 2 groups and 1..n(n-1)/2 destinations", n, dests)
	}
	cc, err := dial(c, "")
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	client := openfgav1.NewOpenFGAServiceClient(cc)
	fx := newFixture(n, dests)
	store, err := client.CreateStore(ctx, &openfgav1.CreateStoreRequest{Name: fx.runner})
	if err != nil {
		return nil, fmt.Errorf("openfga: create store: %w", err)
	}
	var model openfgav1.WriteAuthorizationModelRequest
	if err := protojson.Unmarshal([]byte(fgaModel), &model); err != nil {
		return nil, fmt.Errorf("openfga: model: %w", err)
	}
	model.StoreId = store.GetId()
	written, err := client.WriteAuthorizationModel(ctx, &model)
	if err != nil {
		return nil, fmt.Errorf("openfga: write model: %w", err)
	}
	fx.fga = &fgaStore{storeID: store.GetId(), modelID: written.GetAuthorizationModelId()}
	for start := 0; start < len(fx.pairs); start += fgaWriteMax {
		var keys []*openfgav1.TupleKey
		for _, p := range fx.pairs[start:min(start+fgaWriteMax, len(fx.pairs))] {
			keys = append(keys, fgaTuple(fx.groups[p[0]], fx.groups[p[1]]))
		}
		if _, err := client.Write(ctx, &openfgav1.WriteRequest{StoreId: fx.fga.storeID, AuthorizationModelId: fx.fga.modelID,
			Writes: &openfgav1.WriteRequestWrites{TupleKeys: keys}}); err != nil {
			return nil, fmt.Errorf("openfga: write tuples %d..: %w", start, err)
		}
	}
	return fx, nil
}

func fgaTuple(from, to string) *openfgav1.TupleKey {
	return &openfgav1.TupleKey{User: "agent_group:" + from, Relation: "sender", Object: "agent_group:" + to}
}

// checker answers a Clawguard request with OpenFGA's Check: allowed is ALLOW,
// anything else DENY, so the report counts both systems alike.
func (s *fgaStore) checker(conns []*grpc.ClientConn) func(ctx context.Context, i int, req *guardv1.DecideRequest) (*guardv1.DecideResponse, error) {
	clients := make([]openfgav1.OpenFGAServiceClient, len(conns))
	for i := range clients {
		clients[i] = openfgav1.NewOpenFGAServiceClient(conns[i])
	}
	allow := &guardv1.DecideResponse{Decision: &guardv1.Decision{Effect: guardv1.Effect_EFFECT_ALLOW}}
	deny := &guardv1.DecideResponse{Decision: &guardv1.Decision{Effect: guardv1.Effect_EFFECT_DENY}}
	return func(ctx context.Context, i int, req *guardv1.DecideRequest) (*guardv1.DecideResponse, error) {
		from := req.GetActor().GetAgent().GetAgentGroupId()
		tk := fgaTuple(from, req.GetResource()["to"])
		resp, err := clients[i%len(clients)].Check(ctx, &openfgav1.CheckRequest{StoreId: s.storeID, AuthorizationModelId: s.modelID,
			TupleKey: &openfgav1.CheckRequestTupleKey{User: tk.GetUser(), Relation: tk.GetRelation(), Object: tk.GetObject()}})
		if err != nil {
			return nil, err
		}
		if resp.GetAllowed() {
			return allow, nil
		}
		return deny, nil
	}
}
