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

	"github.com/clawguard/clawguard/proto/enumword"
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
				if w, err := enumword.WordOf(fd.Enum(), ev.Number()); err == nil {
					return w
				}
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
