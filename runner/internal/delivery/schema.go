package delivery

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"google.golang.org/protobuf/types/known/structpb"
)

// Every delivery action declares its payload's JSON Schema (draft 2020-12)
// once, in its Action. The engine validates a payload with that schema
// before any decision, and ListActions serves the same schema to agents
// (clawguard-mcp exposes it as the tool's input schema): the rule an agent
// is shown is the rule it is held to. There is no second copy.

// Draft is the JSON Schema dialect every payload schema is written in.
const Draft = "https://json-schema.org/draft/2020-12/schema"

// compiled is a resolved schema and the JSON text it is served as.
type compiled struct {
	resolved *jsonschema.Resolved
	// shape is the schema without its root's combinators (allOf, anyOf,
	// if…): the validator checks those before the properties, so a payload
	// with a mistyped field would be told only that a combinator failed.
	// Asked first when a payload is refused, it names the field.
	shape *jsonschema.Resolved
	text  string
}

// anyObject is the schema of an action that declares none: any object.
func anyObject() *jsonschema.Schema { return &jsonschema.Schema{Type: "object"} }

func compile(name string, s *jsonschema.Schema) (compiled, error) {
	if s == nil {
		s = anyObject()
	}
	if s.Type != "object" {
		return compiled{}, fmt.Errorf("delivery action %q: payload schema must have type object", name)
	}
	s = s.CloneSchemas()
	s.Schema = Draft
	r, err := s.Resolve(nil)
	if err != nil {
		return compiled{}, fmt.Errorf("delivery action %q: payload schema: %w", name, err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return compiled{}, fmt.Errorf("delivery action %q: payload schema: %w", name, err)
	}
	shape := s.CloneSchemas()
	shape.AllOf, shape.AnyOf, shape.OneOf, shape.Not, shape.If, shape.Then, shape.Else = nil, nil, nil, nil, nil, nil, nil
	sr, err := shape.Resolve(nil)
	if err != nil {
		return compiled{}, fmt.Errorf("delivery action %q: payload schema: %w", name, err)
	}
	return compiled{resolved: r, shape: sr, text: string(b)}, nil
}

// validate checks a payload against the schema; the error is what the agent
// is told.
func (c compiled) validate(name string, p *structpb.Struct) error {
	v := p.AsMap()
	err := c.resolved.Validate(v)
	if err == nil {
		return nil
	}
	if serr := c.shape.Validate(v); serr != nil {
		err = serr
	}
	where, why := schemaError(err)
	rule := c.resolved.Schema().Description
	switch {
	case where == "" && strings.HasPrefix(why, "anyOf:") && rule != "":
		why = rule
	case where != "":
		why = where + ": " + why
	}
	msg := fmt.Sprintf("%s failed: the payload does not match the action's schema: %s", name, why)
	if rule != "" && why != rule {
		msg += " (" + rule + ")"
	}
	return errors.New(msg)
}

// schemaError splits a jsonschema error into where in the payload its
// innermost cause is ("apt[]" for an item of apt; "" for the payload as a
// whole or a combinator) and that cause.
func schemaError(err error) (where, why string) {
	s := err.Error()
	for {
		rest, ok := strings.CutPrefix(s, "validating ")
		if !ok {
			break
		}
		at, tail, ok := strings.Cut(rest, ": ")
		if !ok {
			break
		}
		where, s = payloadPath(at), tail
	}
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	s = strings.ReplaceAll(s, "<invalid reflect.Value>", "null")
	if r := []rune(s); len(r) > 240 {
		// A long value is quoted whole; the count that matters ends the line.
		s = string(r[:120]) + "…" + string(r[len(r)-120:])
	}
	return where, s
}

// payloadPath turns a schema location (/properties/apt/items) into the
// payload's (apt[]); inside a combinator it is "" (the rule is the
// schema's description).
func payloadPath(schemaPath string) string {
	parts := strings.Split(strings.TrimPrefix(schemaPath, "/"), "/")
	var b strings.Builder
	for i := 0; i < len(parts); i++ {
		switch parts[i] {
		case "properties":
			if i+1 < len(parts) {
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(parts[i+1])
				i++
			}
		case "items":
			b.WriteString("[]")
		case "additionalProperties":
			b.WriteString(".*")
		default:
			return ""
		}
	}
	return b.String()
}

// Schema building blocks, so each rule reads once.

// Ptr is a pointer to v (schema bounds are pointers).
func Ptr[T any](v T) *T { return &v }

// NonBlank matches a string with at least one character that is not white
// space, as unicode.IsSpace counts it (strings.TrimSpace leaves something).
// The class lists the characters literally, which Go and ECMA-262 read alike.
const NonBlank = "[^\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"

// StringSchema is a string field.
func StringSchema(description string) *jsonschema.Schema {
	return &jsonschema.Schema{Type: "string", Description: description}
}

// StringListSchema is an optional list of strings (null is the empty list).
func StringListSchema(description string, item *jsonschema.Schema, maxItems int) *jsonschema.Schema {
	s := &jsonschema.Schema{Types: []string{"array", "null"}, Description: description, Items: item}
	if maxItems > 0 {
		s.MaxItems = Ptr(maxItems)
	}
	return s
}

// String reads a string field ("" when absent or not a string).
func String(p *structpb.Struct, key string) string {
	return p.GetFields()[key].GetStringValue()
}

// StringList reads a list of strings; absent is empty, anything else is an error.
func StringList(p *structpb.Struct, key string) ([]string, error) {
	v, ok := p.GetFields()[key]
	if !ok || v == nil {
		return nil, nil
	}
	if _, isNull := v.GetKind().(*structpb.Value_NullValue); isNull {
		return nil, nil
	}
	l := v.GetListValue()
	if l == nil {
		return nil, fmt.Errorf("%s must be a list of strings", key)
	}
	out := make([]string, 0, len(l.GetValues()))
	for _, e := range l.GetValues() {
		s, ok := e.GetKind().(*structpb.Value_StringValue)
		if !ok {
			return nil, fmt.Errorf("%s must be a list of strings", key)
		}
		out = append(out, s.StringValue)
	}
	return out, nil
}
