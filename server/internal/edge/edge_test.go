package edge_test

import (
	"strings"
	"testing"

	"buf.build/gen/go/bufbuild/protovalidate/protocolbuffers/go/buf/validate"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/edge"
	"github.com/clawguard/clawguard/server/internal/rpcdecl"
)

// Every value a request carries is bounded where it enters: each string
// field of every request message (nested ones included) declares a maximum
// length and refuses NUL bytes (not_contains or a pattern that excludes
// them), each enum only defined values, each list and map a maximum size.
// A new field without its rule fails here, before it can reach the database.
func TestEveryRequestFieldIsBounded(t *testing.T) {
	seen := map[protoreflect.FullName]bool{}
	checked := 0
	var walk func(md protoreflect.MessageDescriptor)
	walk = func(md protoreflect.MessageDescriptor) {
		if seen[md.FullName()] || md.FullName().Parent() != "guard.v1" {
			return
		}
		seen[md.FullName()] = true
		fields := md.Fields()
		for i := 0; i < fields.Len(); i++ {
			fd := fields.Get(i)
			name := string(md.Name()) + "." + string(fd.Name())
			rules, _ := proto.GetExtension(fd.Options(), validate.E_Field).(*validate.FieldRules)
			switch {
			case fd.IsMap():
				m := rules.GetMap()
				if m.GetMaxPairs() == 0 {
					t.Errorf("%s: map without max_pairs", name)
				}
				if fd.MapKey().Kind() == protoreflect.StringKind {
					checkString(t, name+" (keys)", m.GetKeys().GetString())
				}
				if fd.MapValue().Kind() == protoreflect.StringKind {
					checkString(t, name+" (values)", m.GetValues().GetString())
				}
				checked++
			case fd.IsList():
				r := rules.GetRepeated()
				// max_items set to 0 is a bound too: a field only the server
				// fills, which a request may not carry at all.
				explicit := r.ProtoReflect().Has(r.ProtoReflect().Descriptor().Fields().ByName("max_items"))
				if !explicit {
					t.Errorf("%s: repeated without max_items", name)
				}
				if fd.Kind() == protoreflect.StringKind && r.GetMaxItems() > 0 {
					checkString(t, name+" (items)", r.GetItems().GetString())
				}
				checked++
			case fd.Kind() == protoreflect.StringKind:
				checkString(t, name, rules.GetString())
				checked++
			case fd.Kind() == protoreflect.EnumKind:
				if !rules.GetEnum().GetDefinedOnly() {
					t.Errorf("%s: enum without defined_only", name)
				}
				checked++
			}
			if fd.Kind() == protoreflect.MessageKind {
				if fd.IsMap() {
					if fd.MapValue().Kind() == protoreflect.MessageKind {
						walk(fd.MapValue().Message())
					}
				} else {
					walk(fd.Message())
				}
			}
		}
	}
	for _, md := range rpcdecl.RequestTypes(rpcdecl.Services...) {
		walk(md)
	}
	if checked < 150 {
		t.Fatalf("only %d request fields checked: request types not found?", checked)
	}
}

func checkString(t *testing.T, name string, r *validate.StringRules) {
	t.Helper()
	if r == nil || (r.GetMaxLen() == 0 && r.GetMaxBytes() == 0) {
		t.Errorf("%s: string without max_len", name)
		return
	}
	if r.GetNotContains() != "\x00" && !strings.Contains(r.GetPattern(), `\x00`) && !closedPattern(r.GetPattern()) {
		t.Errorf("%s: string that may carry a NUL byte (pattern %q)", name, r.GetPattern())
	}
}

// closedPattern: an anchored pattern that names every character it takes
// (no '.' outside a class, no negated class, no class escape that could
// take a NUL byte), so a NUL matches it only when it says \x00.
func closedPattern(p string) bool {
	if !strings.HasPrefix(p, "^") || !strings.HasSuffix(p, "$") {
		return false
	}
	inClass := false
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '\\' && i+1 < len(p):
			if strings.IndexByte("SWDspP", p[i+1]) >= 0 {
				return false
			}
			i++
		case c == '[' && !inClass:
			if i+1 < len(p) && p[i+1] == '^' {
				return false
			}
			inClass = true
		case c == ']' && inClass:
			inClass = false
		case c == '.' && !inClass:
			return false
		}
	}
	return true
}

// The rules compile, a NUL byte anywhere (fields, map values, Struct
// payloads at any depth) is refused in words, and good requests pass.
func TestValidatorRefusesNULAndOverlongValues(t *testing.T) {
	v, err := edge.New(rpcdecl.RequestTypes(rpcdecl.Services...)...)
	if err != nil {
		t.Fatal(err)
	}
	nested, _ := structpb.NewStruct(map[string]any{"apt": []any{"curl", "evil\x00"}})
	key, _ := structpb.NewStruct(map[string]any{"k\x00": "v"})
	cases := []struct {
		name  string
		msg   proto.Message
		field string
	}{
		{"NUL in a group name", &guardv1.CreateGroupRequest{Name: "re\x00search"}, "name: must not contain a NUL byte"},
		{"200 KB group name", &guardv1.CreateGroupRequest{Name: strings.Repeat("a", 200<<10)}, "name: must be at most 256 characters"},
		{"NUL in an id", &guardv1.GetGroupRequest{Id: "ag_\x00"}, "id: does not match regex pattern"},
		{"NUL in a resource value", &guardv1.DecideRequest{Action: "a2a.send", Resource: map[string]string{"to": "b\x00"}}, `resource["to"]: must not contain a NUL byte`},
		{"NUL deep in a payload", &guardv1.DecideRequest{Action: "self_mod.install_packages", Payload: nested}, "payload.apt[1]: must not contain a NUL byte"},
		{"NUL in a payload key", &guardv1.RequestRequest{Kind: "x", Payload: key}, "payload (a key): must not contain a NUL byte"},
		{"NUL in a card's payload", &guardv1.DecideRequest{Action: "x", Card: &guardv1.HoldCard{Payload: nested}}, "card.payload.apt[1]"},
		{"undefined enum", &guardv1.ResolveRequest{Id: "hold_1", Outcome: guardv1.Outcome(42)}, "outcome: value must be one of the defined enum values"},
		{"too many packages", &guardv1.AddGroupPackageRequest{Packages: make([]string, 65)}, "packages: must contain no more than 64 item(s)"},
	}
	for _, c := range cases {
		err := v.Validate(c.msg)
		st := status.Convert(edge.Status(err))
		if err == nil || st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), c.field) || strings.Contains(st.Message(), "\x00") {
			t.Errorf("%s: %v, want InvalidArgument %q (and no NUL echoed)", c.name, st, c.field)
		}
	}
	good, _ := structpb.NewStruct(map[string]any{"apt": []any{"curl"}})
	for _, m := range []proto.Message{
		&guardv1.CreateGroupRequest{Name: "research", CliScope: guardv1.CliScope_CLI_SCOPE_GROUP},
		&guardv1.DecideRequest{Action: "self_mod.install_packages", Payload: good, Grant: "hold_0123abcd", RequestId: "r-1"},
		&guardv1.GrantRoleRequest{UserId: "telegram:dana", Group: "ag_1"},
		&guardv1.RouteInboundRequest{ChannelType: "telegram", PlatformId: "-100123", SenderUserId: "tg:42", Text: "hello, world\n"},
	} {
		if err := v.Validate(m); err != nil {
			t.Errorf("%T refused: %v", m, err)
		}
	}
}

// The NUL walk skips only what cannot hold a Struct: every request type is
// asked, and a NUL planted in each Struct the type graph can reach (through
// messages, lists and maps, to any depth) is found; a type with no Struct
// is accepted without a walk.
func TestNulWalkReachesEveryStructARequestCanHold(t *testing.T) {
	v, err := edge.New(rpcdecl.RequestTypes(rpcdecl.Services...)...)
	if err != nil {
		t.Fatal(err)
	}
	withNul, _ := structpb.NewStruct(map[string]any{"x": "a\x00"})
	planted := 0
	for _, md := range rpcdecl.RequestTypes(rpcdecl.Services...) {
		for _, msg := range plantStructs(md, withNul, 4) {
			planted++
			err := v.Validate(msg)
			if err == nil || !strings.Contains(err.Error(), "must not contain a NUL byte") {
				t.Errorf("%s with a NUL in %s: %v, want refused", md.FullName(), protojsonString(msg), err)
			}
		}
	}
	if planted < 3 {
		t.Fatalf("planted NULs in only %d places; the request types hold at least the Decide payload, the card's and Request's", planted)
	}
}

// plantStructs returns one message of type md per path to a Struct field
// (depth-bounded), with s set at the end of the path and nothing else set.
func plantStructs(md protoreflect.MessageDescriptor, s *structpb.Struct, depth int) []proto.Message {
	if depth == 0 {
		return nil
	}
	var out []proto.Message
	fields := md.Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		val := fd
		if fd.IsMap() {
			val = fd.MapValue()
		}
		if val.Kind() != protoreflect.MessageKind {
			continue
		}
		var inner []protoreflect.Message
		name := val.Message().FullName()
		switch {
		case name == s.ProtoReflect().Descriptor().FullName():
			inner = []protoreflect.Message{s.ProtoReflect()}
		case strings.HasPrefix(string(name), "google.protobuf."):
			// Value and ListValue are walked as Go types; a Struct in them is
			// the payload tests' business.
		default:
			for _, m := range plantStructs(val.Message(), s, depth-1) {
				inner = append(inner, m.ProtoReflect())
			}
		}
		for _, in := range inner {
			m := dynamicpb.NewMessage(md)
			switch {
			case fd.IsMap():
				mp := m.Mutable(fd).Map()
				mp.Set(protoreflect.ValueOfString("k").MapKey(), protoreflect.ValueOfMessage(in))
			case fd.IsList():
				m.Mutable(fd).List().Append(protoreflect.ValueOfMessage(in))
			default:
				m.Set(fd, protoreflect.ValueOfMessage(in))
			}
			out = append(out, m)
		}
	}
	return out
}

func protojsonString(m proto.Message) string {
	b, _ := protojson.Marshal(m)
	return string(b)
}
