// Package secret is where write-only values are, and the one way they are
// taken out of what anyone reads. A secret is declared once, on its proto
// field ((guard.v1.secret) = true: an MCP server's environment values, and
// every credential to come). Redacted finds it wherever the message travels:
// nested in an answer (a group, its config), and inside a hold's or a
// standing grant's payload, whose shape is named by its kind (a message
// declaring (guard.v1.payload_of)) or, for a payload that names a method and
// its request (an agent's admin command), by that method's request type.
// Text built from such a payload (a card's title and question) has the
// payload's secret values scrubbed too. The server passes every answer
// through it but the runner's own reads (rules that say reveals_secrets).
package secret

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"unicode"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Redacted is what a reader sees in place of a secret value. Written back
// as a value where the API says so (AddGroupMcpServer with replace, ncl
// apply), it keeps the value the server holds.
const Redacted = "<redacted>"

// Redact returns m with every secret value it carries replaced by
// Redacted: m itself when it can carry none, else a redacted copy (m is
// never changed, so a message shared between answers stays whole).
func Redact[M proto.Message](m M) M {
	if !proto.Message(m).ProtoReflect().IsValid() || !mayCarry(m.ProtoReflect().Descriptor()) {
		return m
	}
	c := proto.Clone(m).(M)
	redactMessage(c.ProtoReflect())
	return c
}

// IsSecret reports whether a field is marked (guard.v1.secret).
func IsSecret(fd protoreflect.FieldDescriptor) bool {
	v, _ := proto.GetExtension(fd.Options(), guardv1.E_Secret).(bool)
	return v
}

// References lists the secret values of m written as Redacted (the dotted
// field path and, for a map, the key): a request that keeps what the server
// holds rather than setting it.
func References(m proto.Message) []string {
	var out []string
	walkSecrets(m.ProtoReflect(), "", func(path string, fd protoreflect.FieldDescriptor, v protoreflect.Value) {
		switch {
		case fd.IsMap():
			v.Map().Range(func(k protoreflect.MapKey, x protoreflect.Value) bool {
				if x.String() == Redacted {
					out = append(out, path+"."+k.String())
				}
				return true
			})
		case fd.IsList():
			for i := 0; i < v.List().Len(); i++ {
				if v.List().Get(i).String() == Redacted {
					out = append(out, path)
				}
			}
		case v.String() == Redacted:
			out = append(out, path)
		}
	})
	slices.Sort(out)
	return out
}

// walkSecrets visits every populated secret field of m, nested messages
// included, with its dotted path.
func walkSecrets(m protoreflect.Message, prefix string, visit func(string, protoreflect.FieldDescriptor, protoreflect.Value)) {
	if !mayCarry(m.Descriptor()) {
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		path := prefix + string(fd.Name())
		switch {
		case IsSecret(fd):
			visit(path, fd, v)
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				v.Map().Range(func(k protoreflect.MapKey, x protoreflect.Value) bool {
					walkSecrets(x.Message(), path+"."+k.String()+".", visit)
					return true
				})
			}
		case fd.IsList():
			if fd.Message() != nil {
				for i := 0; i < v.List().Len(); i++ {
					walkSecrets(v.List().Get(i).Message(), path+".", visit)
				}
			}
		case fd.Message() != nil:
			walkSecrets(v.Message(), path+".", visit)
		}
		return true
	})
}

// redactMessage redacts m in place.
func redactMessage(m protoreflect.Message) {
	if !mayCarry(m.Descriptor()) {
		return
	}
	var found []string // secret values of a payload here, scrubbed from its text
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case IsSecret(fd):
			redactField(m, fd, v)
		case isPayload(m.Descriptor(), fd):
			p, _ := v.Message().Interface().(*structpb.Struct)
			found = append(found, redactPayload(m.Get(m.Descriptor().Fields().ByName("kind")).String(), p)...)
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				v.Map().Range(func(_ protoreflect.MapKey, x protoreflect.Value) bool {
					redactMessage(x.Message())
					return true
				})
			}
		case fd.IsList():
			if fd.Message() != nil {
				for i := 0; i < v.List().Len(); i++ {
					redactMessage(v.List().Get(i).Message())
				}
			}
		case fd.Message() != nil:
			redactMessage(v.Message())
		}
		return true
	})
	if len(found) > 0 {
		for _, name := range textFields {
			if fd := m.Descriptor().Fields().ByName(name); fd != nil && fd.Kind() == protoreflect.StringKind && !fd.IsList() {
				m.Set(fd, protoreflect.ValueOfString(Scrub(m.Get(fd).String(), found)))
			}
		}
	}
}

// textFields are the words a person reads beside a payload (a hold's card):
// whoever built them, a payload's secret values are scrubbed from them.
var textFields = []protoreflect.Name{"title", "question"}

func redactField(m protoreflect.Message, fd protoreflect.FieldDescriptor, v protoreflect.Value) {
	switch {
	case fd.IsMap():
		var keys []protoreflect.MapKey
		v.Map().Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
			keys = append(keys, k)
			return true
		})
		for _, k := range keys {
			v.Map().Set(k, protoreflect.ValueOfString(Redacted))
		}
	case fd.IsList():
		for i := 0; i < v.List().Len(); i++ {
			v.List().Set(i, protoreflect.ValueOfString(Redacted))
		}
	case fd.Kind() == protoreflect.StringKind && v.String() != "":
		m.Set(fd, protoreflect.ValueOfString(Redacted))
	}
}

// isPayload: a Struct field named payload in a message that has a string
// field kind, which names the payload's shape.
func isPayload(md protoreflect.MessageDescriptor, fd protoreflect.FieldDescriptor) bool {
	if fd.Name() != "payload" || fd.IsList() || fd.IsMap() || fd.Message() == nil || fd.Message().FullName() != structName {
		return false
	}
	k := md.Fields().ByName("kind")
	return k != nil && k.Kind() == protoreflect.StringKind && !k.IsList()
}

var structName = (&structpb.Struct{}).ProtoReflect().Descriptor().FullName()

// RedactPayload redacts, in place, the secret values of a payload of a hold
// kind and returns the values it took out (to scrub from text built from
// the payload).
func RedactPayload(kind string, p *structpb.Struct) []string { return redactPayload(kind, p) }

func redactPayload(kind string, p *structpb.Struct) []string {
	if p == nil {
		return nil
	}
	var found []string
	if md := payloadKinds()[kind]; md != nil {
		redactObject(p, md, &found)
	}
	// A payload naming an RPC and its request (an agent's admin command):
	// the request is that method's input.
	if md := methodInput(p.GetFields()["method"].GetStringValue()); md != nil {
		if req := p.GetFields()["request"].GetStructValue(); req != nil {
			redactObject(req, md, &found)
		}
	}
	return found
}

// redactObject redacts a JSON object shaped like md (keys by proto or JSON
// field name; keys md does not know are left as they are).
func redactObject(obj *structpb.Struct, md protoreflect.MessageDescriptor, found *[]string) {
	for k, v := range obj.GetFields() {
		fd := md.Fields().ByName(protoreflect.Name(k))
		if fd == nil {
			fd = md.Fields().ByJSONName(k)
		}
		switch {
		case fd == nil:
		case IsSecret(fd):
			obj.Fields[k] = redactValue(v, fd.IsMap() || fd.IsList(), found)
		case fd.IsMap() && fd.MapValue().Message() != nil:
			for _, x := range v.GetStructValue().GetFields() {
				if o := x.GetStructValue(); o != nil {
					redactObject(o, fd.MapValue().Message(), found)
				}
			}
		case fd.IsList() && fd.Message() != nil:
			for _, x := range v.GetListValue().GetValues() {
				if o := x.GetStructValue(); o != nil {
					redactObject(o, fd.Message(), found)
				}
			}
		case fd.Message() != nil && v.GetStructValue() != nil:
			redactObject(v.GetStructValue(), fd.Message(), found)
		}
	}
}

// redactValue is a secret field's JSON value redacted: a string (or any
// scalar) becomes Redacted; a map's or a list's every element does, its
// keys kept.
func redactValue(v *structpb.Value, many bool, found *[]string) *structpb.Value {
	one := func(x *structpb.Value) *structpb.Value {
		if s := x.GetStringValue(); s != "" && s != Redacted {
			*found = append(*found, s)
		}
		return structpb.NewStringValue(Redacted)
	}
	switch {
	case many && v.GetStructValue() != nil:
		for k, x := range v.GetStructValue().GetFields() {
			v.GetStructValue().Fields[k] = one(x)
		}
		return v
	case many && v.GetListValue() != nil:
		for i, x := range v.GetListValue().GetValues() {
			v.GetListValue().Values[i] = one(x)
		}
		return v
	}
	if _, isNull := v.GetKind().(*structpb.Value_NullValue); isNull {
		return v
	}
	return one(v)
}

// Scrub replaces every occurrence of each value in text by Redacted, as
// written and as JSON writes it inside a string (a command card shows the
// request as JSON). A value shorter than 8 characters is replaced only
// where it stands alone (not inside a longer word or id), so a short value
// does not garble the rest of the text.
func Scrub(text string, values []string) string {
	vals := make([]string, 0, 2*len(values))
	for _, v := range values {
		if v == "" || v == Redacted {
			continue
		}
		vals = append(vals, v)
		if b, err := json.Marshal(v); err == nil {
			if esc := string(b[1 : len(b)-1]); esc != v {
				vals = append(vals, esc)
			}
		}
	}
	// Longest first: a value inside another is not left half replaced.
	slices.SortFunc(vals, func(a, b string) int { return len(b) - len(a) })
	for _, v := range vals {
		text = replaceValue(text, v)
	}
	return text
}

func replaceValue(text, v string) string {
	if len(v) >= 8 {
		return strings.ReplaceAll(text, v, Redacted)
	}
	var sb strings.Builder
	for {
		i := strings.Index(text, v)
		if i < 0 {
			sb.WriteString(text)
			return sb.String()
		}
		end := i + len(v)
		alone := (i == 0 || !wordRune(lastRune(text[:i]))) && (end == len(text) || !wordRune(firstRune(text[end:])))
		sb.WriteString(text[:i])
		if alone {
			sb.WriteString(Redacted)
		} else {
			sb.WriteString(v)
		}
		text = text[end:]
	}
}

func wordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' }

func lastRune(s string) rune {
	r := []rune(s)
	return r[len(r)-1]
}

func firstRune(s string) rune {
	for _, r := range s {
		return r
	}
	return 0
}

// methodInput is the request type of a full method name ("/pkg.Svc/M" or
// "pkg.Svc/M"), or nil.
func methodInput(fullMethod string) protoreflect.MessageDescriptor {
	if fullMethod == "" {
		return nil
	}
	name := strings.Replace(strings.TrimPrefix(fullMethod, "/"), "/", ".", 1)
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name))
	if err != nil {
		return nil
	}
	if md, ok := d.(protoreflect.MethodDescriptor); ok {
		return md.Input()
	}
	return nil
}

var (
	kindsOnce sync.Once
	kinds     map[string]protoreflect.MessageDescriptor
)

// payloadKinds maps each hold kind some message declares (guard.v1.payload_of)
// to that message, read from every linked proto file once.
func payloadKinds() map[string]protoreflect.MessageDescriptor {
	kindsOnce.Do(func() {
		kinds = map[string]protoreflect.MessageDescriptor{}
		protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
			rangeMessages(fd.Messages(), func(md protoreflect.MessageDescriptor) {
				list, _ := proto.GetExtension(md.Options(), guardv1.E_PayloadOf).([]string)
				for _, k := range list {
					kinds[k] = md
				}
			})
			return true
		})
	})
	return kinds
}

func rangeMessages(ms protoreflect.MessageDescriptors, f func(protoreflect.MessageDescriptor)) {
	for i := 0; i < ms.Len(); i++ {
		f(ms.Get(i))
		rangeMessages(ms.Get(i).Messages(), f)
	}
}

var carryCache sync.Map // protoreflect.FullName → bool

// mayCarry reports whether a message of type md can carry a secret: a
// secret field, a payload (which any kind may shape), or a field of a type
// that can — so the answers that never do (a decision) cost one lookup.
func mayCarry(md protoreflect.MessageDescriptor) bool {
	if v, ok := carryCache.Load(md.FullName()); ok {
		return v.(bool)
	}
	v := carries(md, map[protoreflect.FullName]bool{})
	carryCache.Store(md.FullName(), v)
	return v
}

func carries(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) bool {
	if seen[md.FullName()] {
		return false // a cycle: decided where it started
	}
	seen[md.FullName()] = true
	fields := md.Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		switch {
		case IsSecret(fd), isPayload(md, fd):
			return true
		case fd.IsMap():
			if m := fd.MapValue().Message(); m != nil && carries(m, seen) {
				return true
			}
		case fd.Message() != nil && carries(fd.Message(), seen):
			return true
		}
	}
	return false
}
