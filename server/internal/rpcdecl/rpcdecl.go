// Package rpcdecl reads the guard.v1.rule method option every RPC declares:
// its catalog action, access level and allowed principals. "Declaration is
// registration": the catalog and the interceptors are derived from it, and
// a method without it fails Check at boot.
package rpcdecl

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Exempt services carry no rule: health and reflection skip auth.
var exemptPrefixes = []string{"/grpc.health.v1.", "/grpc.reflection."}

// Exempt reports whether a full method name ("/pkg.Service/Method") is
// outside the rule system (health, reflection).
func Exempt(fullMethod string) bool {
	for _, p := range exemptPrefixes {
		if strings.HasPrefix(fullMethod, p) {
			return true
		}
	}
	return false
}

var cache sync.Map // full method → *guardv1.Rule (nil when absent)

// For returns the rule of a full method name, or nil when it has none.
func For(fullMethod string) *guardv1.Rule {
	if v, ok := cache.Load(fullMethod); ok {
		r, _ := v.(*guardv1.Rule)
		return r
	}
	r := lookup(fullMethod)
	cache.Store(fullMethod, r)
	return r
}

// fullName turns "/pkg.Service/Method" into "pkg.Service.Method".
func fullName(fullMethod string) protoreflect.FullName {
	return protoreflect.FullName(strings.Replace(strings.TrimPrefix(fullMethod, "/"), "/", ".", 1))
}

func lookup(fullMethod string) *guardv1.Rule {
	md := methodDescriptor(fullMethod)
	if md == nil {
		return nil
	}
	r, _ := proto.GetExtension(md.Options(), guardv1.E_Rule).(*guardv1.Rule)
	if r == nil || r.GetAction() == "" {
		return nil
	}
	return r
}

// Check walks every method of every service registered on srv and lists the
// ones without a complete rule (action, access, principals).
func Check(srv *grpc.Server) []string {
	var missing []string
	for svc, info := range srv.GetServiceInfo() {
		for _, m := range info.Methods {
			full := "/" + svc + "/" + m.Name
			if Exempt(full) {
				continue
			}
			missing = append(missing, Problems(full)...)
		}
	}
	sort.Strings(missing)
	return missing
}

// Problems lists what is wrong with one method's declaration.
func Problems(fullMethod string) []string {
	r := For(fullMethod)
	switch {
	case r == nil:
		return []string{fmt.Sprintf("%s has no (guard.v1.rule) option", fullMethod)}
	case r.GetAccess() == guardv1.Access_ACCESS_UNSPECIFIED:
		return []string{fmt.Sprintf("%s declares no access level", fullMethod)}
	case len(r.GetPrincipals()) == 0:
		return []string{fmt.Sprintf("%s declares no principals", fullMethod)}
	case r.GetAdmin() && r.GetResource() == "":
		return []string{fmt.Sprintf("%s is an admin RPC without a resource", fullMethod)}
	case r.GetBridgeAsUser() && (!r.GetAdmin() || !Allows(r, guardv1.Principal_PRINCIPAL_BRIDGE)):
		return []string{fmt.Sprintf("%s declares bridge_as_user but is not an admin RPC bridges may call", fullMethod)}
	case r.GetBridgeAsUser() && AsUserField(inputOf(fullMethod)) == nil:
		return []string{fmt.Sprintf("%s declares bridge_as_user but its request has no string field as_user", fullMethod)}
	case r.GetRevealsSecrets() && (r.GetAdmin() || len(r.GetPrincipals()) != 1 || !Allows(r, guardv1.Principal_PRINCIPAL_RUNNER)):
		// Secrets are the runner's to read for its sessions, no one else's.
		return []string{fmt.Sprintf("%s declares reveals_secrets but a principal other than the runner may call it", fullMethod)}
	case r.GetAdmin():
		return groupProblems(fullMethod)
	}
	return nil
}

// AsUserField is a request's as_user field (the user a bridge acts for),
// or nil when it has none.
func AsUserField(md protoreflect.MessageDescriptor) protoreflect.FieldDescriptor {
	if md == nil {
		return nil
	}
	fd := md.Fields().ByName("as_user")
	if fd == nil || fd.Kind() != protoreflect.StringKind || fd.IsList() {
		return nil
	}
	return fd
}

// Allows reports whether a principal kind may call the method at all.
func Allows(r *guardv1.Rule, p guardv1.Principal) bool {
	for _, allowed := range r.GetPrincipals() {
		if allowed == p {
			return true
		}
	}
	return false
}

// AdminMethods lists the full method names and rules of every admin RPC in
// the given services (by full service name), sorted by action.
func AdminMethods(services ...protoreflect.FullName) []Method {
	var out []Method
	for _, svcName := range services {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(svcName)
		if err != nil {
			continue
		}
		sd, ok := d.(protoreflect.ServiceDescriptor)
		if !ok {
			continue
		}
		for i := 0; i < sd.Methods().Len(); i++ {
			md := sd.Methods().Get(i)
			full := "/" + string(svcName) + "/" + string(md.Name())
			if r := For(full); r != nil && r.GetAdmin() {
				out = append(out, Method{FullMethod: full, Rule: r})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Rule.GetAction() < out[j].Rule.GetAction() })
	return out
}

// RequestTypes are the request messages of every method of the given
// services (what the edge validator compiles at boot).
func RequestTypes(services ...protoreflect.FullName) []protoreflect.MessageDescriptor {
	var out []protoreflect.MessageDescriptor
	for _, svcName := range services {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(svcName)
		if err != nil {
			continue
		}
		sd, ok := d.(protoreflect.ServiceDescriptor)
		if !ok {
			continue
		}
		for i := 0; i < sd.Methods().Len(); i++ {
			out = append(out, sd.Methods().Get(i).Input())
		}
	}
	return out
}

// Method is one declared RPC.
type Method struct {
	FullMethod string
	Rule       *guardv1.Rule
}

// Services are the control plane's services, by full name.
var Services = []protoreflect.FullName{"guard.v1.Guard", "guard.v1.Approvals", "guard.v1.Registry"}
