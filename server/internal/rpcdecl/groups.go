package rpcdecl

import (
	"fmt"
	"regexp"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// groupLike is a field name that reads like an agent group reference:
// "group", "target_group", "from_group", "agent_group_id", "group_ids".
var groupLike = regexp.MustCompile(`(^|_)groups?(_ids?)?$`)

// GroupFields are the dotted paths of the string fields of a request
// message marked (guard.v1.names_group) = true, nested singular messages
// included. The approver scope of a held admin RPC is derived from them.
func GroupFields(md protoreflect.MessageDescriptor) []string {
	var out []string
	walkStrings(md, "", map[protoreflect.FullName]bool{}, func(path string, fd protoreflect.FieldDescriptor) {
		if named, decided := namesGroup(fd); decided && named {
			out = append(out, path)
		}
	})
	return out
}

// UndecidedGroupFields are the fields whose names read like a group
// reference but carry no names_group decision (true or false).
func UndecidedGroupFields(md protoreflect.MessageDescriptor) []string {
	var out []string
	walkStrings(md, "", map[protoreflect.FullName]bool{}, func(path string, fd protoreflect.FieldDescriptor) {
		if _, decided := namesGroup(fd); !decided && groupLike.MatchString(string(fd.Name())) {
			out = append(out, string(md.FullName())+"."+path)
		}
	})
	return out
}

// MethodGroupFields is GroupFields of a method's request message.
func MethodGroupFields(fullMethod string) []string {
	if md := inputOf(fullMethod); md != nil {
		return GroupFields(md)
	}
	return nil
}

func namesGroup(fd protoreflect.FieldDescriptor) (named, decided bool) {
	if !proto.HasExtension(fd.Options(), guardv1.E_NamesGroup) {
		return false, false
	}
	v, _ := proto.GetExtension(fd.Options(), guardv1.E_NamesGroup).(bool)
	return v, true
}

// walkStrings visits every string field (singular or repeated) by its
// dotted path of proto names, descending into message fields once per type.
func walkStrings(md protoreflect.MessageDescriptor, prefix string, seen map[protoreflect.FullName]bool, visit func(string, protoreflect.FieldDescriptor)) {
	if seen[md.FullName()] {
		return
	}
	seen[md.FullName()] = true
	defer delete(seen, md.FullName())
	fields := md.Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		path := prefix + string(fd.Name())
		switch {
		case fd.IsMap():
		case fd.Kind() == protoreflect.StringKind:
			visit(path, fd)
		case fd.Kind() == protoreflect.MessageKind && fd.Message().FullName().Parent() == "guard.v1":
			walkStrings(fd.Message(), path+".", seen, visit)
		}
	}
}

func inputOf(fullMethod string) protoreflect.MessageDescriptor {
	md := methodDescriptor(fullMethod)
	if md == nil {
		return nil
	}
	return md.Input()
}

func methodDescriptor(fullMethod string) protoreflect.MethodDescriptor {
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(fullName(fullMethod))
	if err != nil {
		return nil
	}
	md, _ := d.(protoreflect.MethodDescriptor)
	return md
}

// groupProblems: an admin RPC's request may not carry an undecided
// group-like field — its approver scope would silently ignore it.
func groupProblems(fullMethod string) []string {
	md := inputOf(fullMethod)
	if md == nil {
		return nil
	}
	var out []string
	for _, f := range UndecidedGroupFields(md) {
		out = append(out, fmt.Sprintf("%s: request field %s reads like a group reference but declares no (guard.v1.names_group) true or false", fullMethod, f))
	}
	return out
}
