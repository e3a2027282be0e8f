package handlers

import (
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/clawguard/clawguard/runner/internal/delivery"
)

func registered(t *testing.T) *delivery.Registry {
	t.Helper()
	reg := delivery.NewRegistry(nil)
	if err := Register(reg, Deps{Conn: (*grpc.ClientConn)(nil)}); err != nil {
		t.Fatal(err)
	}
	return reg
}

// TestEveryActionDeclaresItsPayload: each action a container may send is
// described to agents with a schema of its own (not the any-object default).
func TestEveryActionDeclaresItsPayload(t *testing.T) {
	for _, s := range registered(t).Specs() {
		if s.GetDescription() == "" || !strings.Contains(s.GetInputSchemaJson(), `"properties"`) {
			t.Errorf("%s: description %q, schema %s", s.GetName(), s.GetDescription(), s.GetInputSchemaJson())
		}
	}
}

// TestCLIRequestSchemaIsResolveMethod: the schema accepts exactly the
// methods the handler resolves, in every spelling, over every method of
// every service in the registry.
func TestCLIRequestSchemaIsResolveMethod(t *testing.T) {
	reg := registered(t)
	var methods []string
	protoregistry.GlobalFiles.RangeFiles(func(f protoreflect.FileDescriptor) bool {
		for i := range f.Services().Len() {
			sd := f.Services().Get(i)
			for j := range sd.Methods().Len() {
				name, full, short := string(sd.Methods().Get(j).Name()), string(sd.FullName()), string(sd.Name())
				methods = append(methods, name, "/"+name, "//"+name, short+"/"+name, "/"+short+"/"+name,
					full+"/"+name, "/"+full+"/"+name, "x."+full+"/"+name, full+"/"+name+"/x")
			}
		}
		return true
	})
	methods = append(methods, "", "/", "Registry/", "ListGroups ", " ListGroups", "listgroups")
	accepted := 0
	for _, m := range methods {
		p := &structpb.Struct{Fields: map[string]*structpb.Value{"method": structpb.NewStringValue(m)}}
		_, rerr := resolveMethod(p)
		serr := reg.Validate(delivery.Session{}, CLIRequest, p)
		if (rerr == nil) != (serr == nil) {
			t.Errorf("%q: resolveMethod %v, schema %v", m, rerr, serr)
		}
		if serr == nil {
			accepted++
		}
	}
	if accepted < 40 {
		t.Fatalf("only %d spellings accepted", accepted)
	}
	for _, req := range []any{"x", 1.0, []any{}} {
		p, _ := structpb.NewStruct(map[string]any{"method": "ListGroups", "request": req})
		if reg.Validate(delivery.Session{}, CLIRequest, p) == nil {
			t.Errorf("request %v accepted", req)
		}
	}
}

func TestReplySchema(t *testing.T) {
	reg := registered(t)
	for _, c := range []struct {
		in   map[string]any
		want string
	}{
		{map[string]any{"text": "hi"}, ""},
		{map[string]any{"text": "hi", "notice": true}, ""},
		{map[string]any{"text": strings.Repeat("é", maxReplyChars)}, ""},
		{map[string]any{"text": strings.Repeat("é", maxReplyChars+1)}, "maxLength"},
		{map[string]any{"text": " \n\t"}, "pattern"},
		{map[string]any{}, `"text"`},
		{map[string]any{"text": "hi", "notice": "yes"}, "type"},
	} {
		p, _ := structpb.NewStruct(c.in)
		err := reg.Validate(delivery.Session{}, Reply, p)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v: err = %v, want %q", c.in, err, c.want)
		}
	}
}
