// Package edge validates requests where they enter the server: the
// protovalidate rules declared in the protos (lengths, id shapes, enum
// values, list sizes, no NUL bytes), plus what those rules cannot express
// about a google.protobuf.Struct payload: no NUL byte anywhere in it, which
// Postgres refuses in text and jsonb, and at most MaxStructBytes encoded. A request that fails never reaches a handler,
// the guard or the database, and the caller gets InvalidArgument naming the
// field.
//
// buf/validate/validate.proto is vendored under
// proto/third_party/protovalidate (the BSR is not reachable from every build
// machine); its Go code is the published module. The validator runs in the
// interceptor chain after authentication, and per frame in DecideStream.
package edge

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"buf.build/gen/go/bufbuild/protovalidate/protocolbuffers/go/buf/validate"
	"buf.build/go/protovalidate"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"
)

// MaxStructBytes bounds one Struct payload of a request, encoded (a
// request as a whole is bounded by the server's MaxRecvMsgSize).
const MaxStructBytes = 256 << 10

// Validator is a protovalidate.Validator (so the go-grpc-middleware
// interceptor can use it) that adds the Struct payload check and says
// "NUL byte" instead of echoing one.
type Validator struct {
	pv protovalidate.Validator
}

// New builds the validator and compiles the rules of the given request
// types up front, so a rule that does not compile fails at boot.
func New(requests ...protoreflect.MessageDescriptor) (*Validator, error) {
	pv, err := protovalidate.New(protovalidate.WithMessageDescriptors(requests...))
	if err != nil {
		return nil, fmt.Errorf("compile request validation rules: %w", err)
	}
	return &Validator{pv: pv}, nil
}

// Validate checks msg; violations come back as *Invalid.
func (v *Validator) Validate(msg proto.Message, opts ...protovalidate.ValidationOption) error {
	err := v.pv.Validate(msg, opts...)
	var verr *protovalidate.ValidationError
	if err != nil && !errors.As(err, &verr) {
		return err
	}
	if bad := badStruct(msg.ProtoReflect(), ""); bad.path != "" {
		if verr == nil {
			verr = &protovalidate.ValidationError{}
		}
		verr.Violations = append(verr.Violations, &protovalidate.Violation{Proto: validate.Violation_builder{
			RuleId:  proto.String(bad.rule),
			Message: proto.String(bad.path + ": " + bad.message),
		}.Build()})
	}
	if verr == nil || len(verr.Violations) == 0 {
		return nil
	}
	for _, vi := range verr.Violations {
		if vi.Proto.GetRuleId() == "string.not_contains" {
			// The only not_contains rule the protos declare is NUL.
			vi.Proto.SetMessage("must not contain a NUL byte")
		}
	}
	return &Invalid{ValidationError: verr}
}

// Invalid is a request's violations, worded "<field>: <what is wrong>" like
// the handlers' own InvalidArgument messages ("; " between several). It
// unwraps to the *protovalidate.ValidationError the middleware looks for.
type Invalid struct {
	*protovalidate.ValidationError
}

func (e *Invalid) Error() string {
	parts := make([]string, 0, len(e.Violations))
	for _, v := range e.Violations {
		parts = append(parts, v.String())
	}
	return strings.Join(parts, "; ")
}

func (e *Invalid) Unwrap() error { return e.ValidationError }

// Status is the InvalidArgument a violation becomes, as the go-grpc-middleware
// interceptor makes it (DecideStream answers one frame with it instead of
// ending the stream).
func Status(err error) error {
	var verr *protovalidate.ValidationError
	if errors.As(err, &verr) {
		st := status.New(codes.InvalidArgument, err.Error())
		if ds, derr := st.WithDetails(verr.ToProto()); derr == nil {
			return ds.Err()
		}
		return st.Err()
	}
	// A rule that does not evaluate is the server's fault, not the caller's.
	return status.Error(codes.Internal, "request validation failed")
}

var (
	structName = (&structpb.Struct{}).ProtoReflect().Descriptor().FullName()
	valueName  = (&structpb.Value{}).ProtoReflect().Descriptor().FullName()
	listName   = (&structpb.ListValue{}).ProtoReflect().Descriptor().FullName()
)

// structFault is the first Struct payload a request may not carry.
type structFault struct{ path, rule, message string }

// badStruct finds the first Struct, Value or ListValue larger than
// MaxStructBytes, or with a key or string value that carries a NUL byte
// (path "" when there is none). It visits set fields only.
func badStruct(m protoreflect.Message, prefix string) structFault {
	switch m.Descriptor().FullName() {
	case structName, valueName, listName:
		path := strings.TrimSuffix(prefix, ".")
		if proto.Size(m.Interface()) > MaxStructBytes {
			return structFault{path, "guard.struct.max_bytes", fmt.Sprintf("larger than %d KiB", MaxStructBytes>>10)}
		}
		if nul := nulInStructs(m, prefix); nul != "" {
			return structFault{nul, "guard.struct.no_nul", "must not contain a NUL byte"}
		}
		return structFault{}
	}
	if !mayHoldStruct(m.Descriptor()) {
		return structFault{}
	}
	var found structFault
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if !fieldMayHoldStruct(fd) {
			return true
		}
		path := prefix + string(fd.Name())
		switch {
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len() && found.path == ""; i++ {
				found = badStruct(l.Get(i).Message(), fmt.Sprintf("%s[%d].", path, i))
			}
		case fd.IsMap(): // of messages: fieldMayHoldStruct passed it
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				found = badStruct(mv.Message(), fmt.Sprintf("%s[%q].", path, k.String()))
				return found.path == ""
			})
		default:
			found = badStruct(v.Message(), path+".")
		}
		return found.path == ""
	})
	return found
}

// nulInStructs is the path of the first key or string value of a Struct,
// Value or ListValue that carries a NUL byte, "" when none does.
func nulInStructs(m protoreflect.Message, prefix string) string {
	switch m.Descriptor().FullName() {
	case structName:
		return nulInStruct(m.Interface().(*structpb.Struct), strings.TrimSuffix(prefix, "."))
	case valueName:
		return nulInValue(m.Interface().(*structpb.Value), strings.TrimSuffix(prefix, "."))
	case listName:
		return nulInValue(structpb.NewListValue(m.Interface().(*structpb.ListValue)), strings.TrimSuffix(prefix, "."))
	}
	return ""
}

// reachesStruct caches, per message type, whether a Struct, Value or
// ListValue can be found in it at any depth: the walk above skips every
// field that cannot lead to one (most of a request, and on Guard.Decide's
// path all but its payloads).
var reachesStruct sync.Map // protoreflect.FullName → bool

func mayHoldStruct(md protoreflect.MessageDescriptor) bool {
	if v, ok := reachesStruct.Load(md.FullName()); ok {
		return v.(bool)
	}
	found := reaches(md, map[protoreflect.FullName]bool{})
	reachesStruct.Store(md.FullName(), found)
	return found
}

// reaches walks the type graph once (seen breaks cycles: a type being
// walked is answered by its other fields).
func reaches(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) bool {
	switch md.FullName() {
	case structName, valueName, listName:
		return true
	}
	if seen[md.FullName()] {
		return false
	}
	seen[md.FullName()] = true
	fields := md.Fields()
	for i := 0; i < fields.Len(); i++ {
		if m := valueMessage(fields.Get(i)); m != nil && reaches(m, seen) {
			return true
		}
	}
	return false
}

// fieldMayHoldStruct reports whether a field's values can hold a Struct,
// Value or ListValue.
func fieldMayHoldStruct(fd protoreflect.FieldDescriptor) bool {
	m := valueMessage(fd)
	return m != nil && mayHoldStruct(m)
}

// valueMessage is the message type of a field's values (a map's values),
// nil when they are scalars.
func valueMessage(fd protoreflect.FieldDescriptor) protoreflect.MessageDescriptor {
	if fd.IsMap() {
		fd = fd.MapValue()
	}
	if fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind {
		return nil
	}
	return fd.Message()
}

func nulInStruct(s *structpb.Struct, path string) string {
	for k, v := range s.GetFields() {
		if strings.IndexByte(k, 0) >= 0 {
			return path + " (a key)"
		}
		if p := nulInValue(v, path+"."+k); p != "" {
			return p
		}
	}
	return ""
}

func nulInValue(v *structpb.Value, path string) string {
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		if strings.IndexByte(k.StringValue, 0) >= 0 {
			return path
		}
	case *structpb.Value_StructValue:
		return nulInStruct(k.StructValue, path)
	case *structpb.Value_ListValue:
		for i, e := range k.ListValue.GetValues() {
			if p := nulInValue(e, fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
	}
	return ""
}
