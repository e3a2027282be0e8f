package handlers

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/runner/internal/delivery"
)

// SessionHeader names the session a runner acts for (the server checks the
// runner hosts it; the agent becomes the actor of the call).
const SessionHeader = "x-clawguard-session"

// cliServices are where an agent's ncl may reach; only methods whose rule
// says admin: true (the admin resources) and that are unary.
var cliServices = []string{"guard.v1.Registry", "guard.v1.Approvals"}

// resolveMethod reads {"method": "ListGroups" | "Registry/ListGroups" |
// "guard.v1.Approvals/List", "request": {...}} and finds the admin RPC.
func resolveMethod(p *structpb.Struct) (protoreflect.MethodDescriptor, error) {
	m := delivery.String(p, "method")
	if m == "" {
		return nil, errors.New("cli_request failed: method is required (e.g. \"ListGroups\")")
	}
	if r, ok := p.GetFields()["request"]; ok && r.GetStructValue() == nil {
		if _, isNull := r.GetKind().(*structpb.Value_NullValue); !isNull {
			return nil, errors.New("cli_request failed: request must be an object")
		}
	}
	svcName, method, qualified := strings.Cut(strings.TrimPrefix(m, "/"), "/")
	if !qualified {
		svcName, method = "", strings.TrimPrefix(m, "/")
	} else if svcName == "" {
		return nil, fmt.Errorf("cli_request failed: unknown command %q", m)
	}
	for _, s := range cliServices {
		if svcName != "" && svcName != s && "guard.v1."+svcName != s {
			continue
		}
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(s))
		if err != nil {
			continue
		}
		md := d.(protoreflect.ServiceDescriptor).Methods().ByName(protoreflect.Name(method))
		if md == nil {
			continue
		}
		rule, _ := proto.GetExtension(md.Options(), guardv1.E_Rule).(*guardv1.Rule)
		if !rule.GetAdmin() || md.IsStreamingClient() || md.IsStreamingServer() {
			return nil, fmt.Errorf("cli_request failed: %s is not an admin command", method)
		}
		return md, nil
	}
	return nil, fmt.Errorf("cli_request failed: unknown command %q", m)
}

// cliRequestSchema is cli_request's payload schema: method is one of the
// commands resolveMethod finds (derived from it, over every method of the
// services an agent may reach), bare ("ListGroups", "/ListGroups") or
// qualified ("Registry/ListGroups", "/guard.v1.Approvals/List").
func cliRequestSchema() *jsonschema.Schema {
	var bare []string
	qualified := map[string][]string{}
	seen := map[string]bool{}
	for _, svc := range cliServices {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
		if err != nil {
			panic(fmt.Sprintf("cli_request: service %s is not linked in: %v", svc, err))
		}
		methods := d.(protoreflect.ServiceDescriptor).Methods()
		for i := range methods.Len() {
			name := string(methods.Get(i).Name())
			if _, err := resolveMethod(methodPayload(svc + "/" + name)); err == nil {
				qualified[svc] = append(qualified[svc], name)
			}
			if !seen[name] {
				seen[name] = true
				if _, err := resolveMethod(methodPayload(name)); err == nil {
					bare = append(bare, name)
				}
			}
		}
	}
	alts := []string{alternation(bare)}
	for _, svc := range cliServices {
		short := svc[strings.LastIndexByte(svc, '.')+1:]
		pkg := regexp.QuoteMeta(strings.TrimSuffix(svc, short))
		alts = append(alts, "(?:"+pkg+")?"+short+"/"+alternation(qualified[svc]))
	}
	return &jsonschema.Schema{
		Type:     "object",
		Required: []string{"method"},
		Properties: map[string]*jsonschema.Schema{
			"method": {Type: "string", Pattern: "^/?(?:" + strings.Join(alts, "|") + ")$",
				Description: "The admin command's RPC, e.g. \"ListGroups\", \"GetGroup\" or \"Approvals/List\""},
			"request": {Types: []string{"object", "null"},
				Description: "The RPC's request message as JSON (protobuf JSON names), e.g. {\"id\": \"ag_1\"}"},
		},
		PropertyOrder: []string{"method", "request"},
	}
}

func methodPayload(m string) *structpb.Struct {
	return &structpb.Struct{Fields: map[string]*structpb.Value{"method": structpb.NewStringValue(m)}}
}

func alternation(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = regexp.QuoteMeta(n)
	}
	return "(?:" + strings.Join(q, "|") + ")"
}

// cliRequest calls the admin RPC as the session's agent. The server's guard
// interceptor decides (an approval-access command comes back held, and the
// server replays it itself once approved).
func (h *handlers) cliRequest(ctx context.Context, c delivery.Call) delivery.Outcome {
	md, err := resolveMethod(c.Payload)
	if err != nil {
		return delivery.Failed("%v", err)
	}
	inType, err := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
	if err != nil {
		return delivery.Failed("cli_request failed: %v", err)
	}
	outType, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
	if err != nil {
		return delivery.Failed("cli_request failed: %v", err)
	}
	in, out := inType.New().Interface(), outType.New().Interface()
	if r := c.Payload.GetFields()["request"].GetStructValue(); r != nil {
		b, err := protojson.Marshal(r)
		if err == nil {
			err = protojson.Unmarshal(b, in)
		}
		if err != nil {
			return delivery.Failed("cli_request failed: request does not fit %s: %v", md.Input().Name(), err)
		}
	}
	full := "/" + string(md.Parent().FullName()) + "/" + string(md.Name())
	ctx = metadata.AppendToOutgoingContext(ctx, SessionHeader, c.Session.ID)
	if err := h.d.Conn.Invoke(ctx, full, in, out); err != nil {
		st := status.Convert(err)
		for _, d := range st.Details() {
			if p, ok := d.(*guardv1.ApprovalPending); ok {
				return delivery.Held(p.GetHoldId(), orText(p.GetReason(), st.Message()))
			}
		}
		if st.Code() == codes.PermissionDenied {
			return delivery.Denied(st.Message())
		}
		return delivery.Failed("cli_request %s failed: %s: %s", md.Name(), st.Code(), st.Message())
	}
	b, err := protojson.Marshal(out)
	if err != nil {
		return delivery.Failed("cli_request %s: encode result: %v", md.Name(), err)
	}
	res := &structpb.Struct{}
	if err := protojson.Unmarshal(b, res); err != nil {
		return delivery.Failed("cli_request %s: encode result: %v", md.Name(), err)
	}
	return delivery.Done(res, string(md.Name())+" ok")
}

func errText(err error) string {
	st := status.Convert(err)
	return st.Code().String() + ": " + st.Message()
}
