// Package jsonview is the one JSON shape of Clawguard's API objects for
// people and scripts: what `ncl -o json` prints and what the approval
// webhook posts. protojson with the proto field names (snake_case) and every
// field present, enums as their lower-case word ("allow", not
// "EFFECT_ALLOW"), 64-bit integers as numbers.
package jsonview

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Value is m as a JSON value (a map for a message).
func Value(m proto.Message) (any, error) {
	b, err := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", m.ProtoReflect().Descriptor().FullName(), err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decode json: %w", err)
	}
	return fixMessage(m.ProtoReflect().Descriptor(), v), nil
}

func fixMessage(md protoreflect.MessageDescriptor, v any) any {
	if strings.HasPrefix(string(md.FullName()), "google.protobuf.") {
		return v // well-known types keep their canonical JSON
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return v
	}
	for k, val := range obj {
		if fd := md.Fields().ByName(protoreflect.Name(k)); fd != nil {
			obj[k] = fixField(fd, val)
		}
	}
	return obj
}

func fixField(fd protoreflect.FieldDescriptor, v any) any {
	switch {
	case fd.IsMap():
		if m, ok := v.(map[string]any); ok {
			for k, x := range m {
				m[k] = fixSingle(fd.MapValue(), x)
			}
		}
		return v
	case fd.IsList():
		if arr, ok := v.([]any); ok {
			for i, x := range arr {
				arr[i] = fixSingle(fd, x)
			}
		}
		return v
	}
	return fixSingle(fd, v)
}

func fixSingle(fd protoreflect.FieldDescriptor, v any) any {
	switch fd.Kind() {
	case protoreflect.EnumKind:
		if s, ok := v.(string); ok {
			if ev := fd.Enum().Values().ByName(protoreflect.Name(s)); ev != nil {
				return EnumWord(fd.Enum(), ev.Number())
			}
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return fixMessage(fd.Message(), v)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		if s, ok := v.(string); ok {
			return json.Number(s)
		}
	}
	return v
}

// EnumWord is an enum value as people type it: EFFECT_ALLOW → "allow",
// SENDER_POLICY_REQUEST_APPROVAL → "request_approval"; unspecified → "".
func EnumWord(ed protoreflect.EnumDescriptor, n protoreflect.EnumNumber) string {
	if n == 0 {
		return ""
	}
	ev := ed.Values().ByNumber(n)
	if ev == nil {
		return fmt.Sprintf("%d", n)
	}
	return strings.ToLower(strings.TrimPrefix(string(ev.Name()), EnumPrefix(ed)))
}

// EnumPrefix is the shared prefix of an enum's value names, taken from its
// zero value (EFFECT_UNSPECIFIED → "EFFECT_").
func EnumPrefix(ed protoreflect.EnumDescriptor) string {
	return strings.TrimSuffix(string(ed.Values().ByNumber(0).Name()), "UNSPECIFIED")
}
