package api_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/api"
	"github.com/clawguard/clawguard/server/internal/rpcdecl"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// Holds that can never succeed (issue 29): an agent's admin call that the
// handler would refuse as InvalidArgument is refused the same way, before
// the guard is consulted, and no hold is created.

type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// seedAdminWorld: group g1 (cli_scope global) and g3 (cli_scope group),
// each with a session on runner r1; g2 another group; an owner to approve.
func seedAdminWorld(t *testing.T, srv *testserver.Server) {
	t.Helper()
	for _, q := range []string{
		`INSERT INTO agent_groups (id, name) VALUES ('g1', 'g1'), ('g2', 'g2'), ('g3', 'g3')`,
		`INSERT INTO container_configs (agent_group_id, cli_scope) VALUES ('g1', 'global'), ('g3', 'group')`,
		`INSERT INTO runners (id, host, lease_expires_at) VALUES ('r1', 'h', now() + interval '1 hour')`,
		`INSERT INTO sessions (id, agent_group_id, runner_id) VALUES ('s1', 'g1', 'r1'), ('s3', 'g3', 'r1')`,
		`INSERT INTO users (id) VALUES ('tg:olivia')`,
		`INSERT INTO user_roles (user_id, role) VALUES ('tg:olivia', 'owner')`,
	} {
		if _, err := srv.Pool.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func holdCount(t *testing.T, srv *testserver.Server) int {
	t.Helper()
	var n int
	if err := srv.Pool.QueryRow(context.Background(), `SELECT count(*) FROM holds`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func heldID(err error) string {
	for _, d := range status.Convert(err).Details() {
		if p, ok := d.(*guardv1.ApprovalPending); ok {
			return p.GetHoldId()
		}
	}
	return ""
}

// The reported attack: the add-package RPC called directly by an agent
// with names the operator's own call refuses.
func TestAgentAddPackageWithABadNameIsRefusedNotHeld(t *testing.T) {
	var logs lockedLog
	srv := testserver.StartLogged(t, &logs)
	seedAdminWorld(t, srv)
	ctx := context.Background()
	global := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "runner", "r1", ""), "s1"))
	scoped := testserver.ClientsFor(srv.Conn(t, srv.Token(t, "runner", "r1", ""), "s3"))
	op := srv.Operator(t)
	before := holdCount(t, srv)
	for _, name := range []string{"$(id)", "jq;id", "--allow-unauthenticated", "-o", "", "Curl", "curl; rm -rf /", "`id`", "a|b", "@scope/", strings.Repeat("a", 215)} {
		for _, m := range []guardv1.PackageManager{guardv1.PackageManager_PACKAGE_MANAGER_APT, guardv1.PackageManager_PACKAGE_MANAGER_NPM} {
			for who, c := range map[string]testserver.Clients{"global agent": global, "group agent": scoped} {
				_, err := c.Registry.AddGroupPackage(ctx, &guardv1.AddGroupPackageRequest{Manager: m, Packages: []string{"jq", name}})
				if status.Code(err) != codes.InvalidArgument || heldID(err) != "" {
					t.Errorf("%s adds %s %q: %v, want InvalidArgument and no hold", who, m, name, err)
				}
			}
			if _, err := op.Registry.AddGroupPackage(ctx, &guardv1.AddGroupPackageRequest{Group: "g1", Manager: m, Packages: []string{name}}); status.Code(err) != codes.InvalidArgument {
				t.Errorf("operator adds %s %q: %v, want InvalidArgument", m, name, err)
			}
		}
	}
	// No manager, no packages: refused too.
	if _, err := global.Registry.AddGroupPackage(ctx, &guardv1.AddGroupPackageRequest{Packages: []string{"jq"}}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("no manager: %v", err)
	}
	if _, err := global.Registry.AddGroupPackage(ctx, &guardv1.AddGroupPackageRequest{Group: "g1", Manager: guardv1.PackageManager_PACKAGE_MANAGER_APT}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("no packages: %v", err)
	}
	if n := holdCount(t, srv); n != before {
		t.Fatalf("%d holds created by invalid requests", n-before)
	}
	if !strings.Contains(logs.String(), "refused before the guard: invalid request") || !strings.Contains(logs.String(), `jq;id`) {
		t.Fatal("the refusal of the agent's invalid call is not logged")
	}
	// A valid name is still held for a human (nothing else changed).
	_, err := global.Registry.AddGroupPackage(ctx, &guardv1.AddGroupPackageRequest{Group: "g1", Manager: guardv1.PackageManager_PACKAGE_MANAGER_APT, Packages: []string{"jq"}})
	if status.Code(err) != codes.FailedPrecondition || heldID(err) == "" {
		t.Fatalf("a valid package from an agent: %v, want a hold", err)
	}
}

// hostile are values tried in every string field of every holdable admin
// RPC; numbers and enums get out-of-range and unset values.
var hostile = []string{"", " ", "$(id)", "jq;id", "--allow-unauthenticated", "-rf", "UPPER", "a b", "../../etc/passwd", "x\ty", strings.Repeat("a", 300)}

// plausible is a value a field of this name would take in a valid
// request, so that varying one field at a time reaches that field's check.
func plausible(fd protoreflect.FieldDescriptor) protoreflect.Value {
	name := string(fd.Name())
	switch fd.Kind() {
	case protoreflect.StringKind:
		switch {
		case strings.Contains(name, "user"):
			return protoreflect.ValueOfString("tg:olivia")
		case strings.Contains(name, "image"):
			return protoreflect.ValueOfString("debian:12")
		case name == "cpus":
			return protoreflect.ValueOfString("1")
		case name == "memory":
			return protoreflect.ValueOfString("512m")
		case name == "channel_type" || name == "channels":
			return protoreflect.ValueOfString("telegram")
		case name == "action":
			return protoreflect.ValueOfString("a2a.send")
		case name == "command":
			return protoreflect.ValueOfString("npx")
		}
		return protoreflect.ValueOfString("g1")
	case protoreflect.EnumKind:
		if vs := fd.Enum().Values(); vs.Len() > 1 {
			return protoreflect.ValueOfEnum(vs.Get(1).Number())
		}
		return protoreflect.ValueOfEnum(0)
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(false)
	case protoreflect.Int32Kind:
		return protoreflect.ValueOfInt32(0)
	}
	return fd.Default()
}

// baseRequest fills every field of a request with a plausible value (one
// level of nested messages).
func baseRequest(m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		switch {
		case fd.IsMap():
		case fd.IsList() && fd.Kind() == protoreflect.StringKind:
			m.Mutable(fd).List().Append(plausible(fd))
		case fd.IsList():
		case fd.Kind() == protoreflect.MessageKind:
			if depth < 1 {
				baseRequest(m.Mutable(fd).Message(), depth+1)
			}
		default:
			m.Set(fd, plausible(fd))
		}
	}
}

// variants are base with one field changed to each hostile value.
func variants(base proto.Message) map[string]proto.Message {
	out := map[string]proto.Message{"base": proto.Clone(base)}
	var walk func(path string, get func(proto.Message) protoreflect.Message)
	walk = func(path string, get func(proto.Message) protoreflect.Message) {
		fields := get(base).Descriptor().Fields()
		for i := 0; i < fields.Len(); i++ {
			fd := fields.Get(i)
			p := path + string(fd.Name())
			set := func(label string, change func(m protoreflect.Message)) {
				v := proto.Clone(base)
				change(get(v))
				out[p+"="+label] = v
			}
			switch {
			case fd.IsMap():
			case fd.IsList() && fd.Kind() == protoreflect.StringKind:
				set("[]", func(m protoreflect.Message) { m.Clear(fd) })
				for _, h := range hostile {
					set(fmt.Sprintf("[%q]", h), func(m protoreflect.Message) { m.Mutable(fd).List().Set(0, protoreflect.ValueOfString(h)) })
				}
			case fd.IsList():
			case fd.Kind() == protoreflect.MessageKind:
				set("unset", func(m protoreflect.Message) { m.Clear(fd) })
				if path == "" {
					walk(p+".", func(msg proto.Message) protoreflect.Message { return get(msg).Mutable(fd).Message() })
				}
			case fd.Kind() == protoreflect.StringKind:
				for _, h := range hostile {
					set(fmt.Sprintf("%q", h), func(m protoreflect.Message) { m.Set(fd, protoreflect.ValueOfString(h)) })
				}
			case fd.Kind() == protoreflect.EnumKind:
				for _, n := range []protoreflect.EnumNumber{0, 99} {
					set(fmt.Sprint(n), func(m protoreflect.Message) { m.Set(fd, protoreflect.ValueOfEnum(n)) })
				}
			case fd.Kind() == protoreflect.Int32Kind:
				for _, n := range []int32{-1, 2, 11, 1000} {
					set(fmt.Sprint(n), func(m protoreflect.Message) { m.Set(fd, protoreflect.ValueOfInt32(n)) })
				}
			}
		}
	}
	walk("", func(m proto.Message) protoreflect.Message { return m.ProtoReflect() })
	return out
}

func inputOf(t *testing.T, fullMethod string) proto.Message {
	t.Helper()
	name := strings.Replace(strings.TrimPrefix(fullMethod, "/"), "/", ".", 1)
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name))
	if err != nil {
		t.Fatal(err)
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(d.(protoreflect.MethodDescriptor).Input().FullName())
	if err != nil {
		t.Fatal(err)
	}
	return mt.New().Interface()
}

func outputOf(t *testing.T, fullMethod string) proto.Message {
	t.Helper()
	name := strings.Replace(strings.TrimPrefix(fullMethod, "/"), "/", ".", 1)
	d, _ := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name))
	mt, err := protoregistry.GlobalTypes.FindMessageByName(d.(protoreflect.MethodDescriptor).Output().FullName())
	if err != nil {
		t.Fatal(err)
	}
	return mt.New().Interface()
}

// Every admin RPC that can be held, every field varied: whenever the
// operator's own call (the handler, on a twin server) is refused as
// InvalidArgument, the agent's call is refused as InvalidArgument too and
// no hold is created — for a global-scope agent and for a group-scope one
// (whose omitted group fields the guard fills).
func TestNoAdminRPCHoldsARequestItsHandlerRefuses(t *testing.T) {
	agentSrv := testserver.Start(t)
	oracle := testserver.Start(t)
	seedAdminWorld(t, agentSrv)
	seedAdminWorld(t, oracle)
	ctx := context.Background()
	agents := map[string]*grpc.ClientConn{
		"g1": agentSrv.Conn(t, agentSrv.Token(t, "runner", "r1", ""), "s1"),
		"g3": agentSrv.Conn(t, agentSrv.Token(t, "runner", "r1", ""), "s3"),
	}
	op := oracle.Conn(t, oracle.OperatorToken, "")
	refused, held, methods := 0, 0, 0
	for _, m := range rpcdecl.AdminMethods(rpcdecl.Services...) {
		if m.Rule.GetAccess() != guardv1.Access_ACCESS_APPROVAL {
			continue
		}
		methods++
		base := inputOf(t, m.FullMethod)
		baseRequest(base.ProtoReflect(), 0)
		for label, req := range variants(base) {
			for group, conn := range agents {
				agentReq := proto.Clone(req)
				opReq := proto.Clone(req)
				if group == "g3" {
					// What the guard does for a group-scope agent, done
					// for the operator's twin call as well.
					api.FillGroup(agentReq, "g3")
					api.FillGroup(opReq, "g3")
				}
				n := holdCount(t, agentSrv)
				agentErr := conn.Invoke(ctx, m.FullMethod, agentReq, outputOf(t, m.FullMethod))
				opErr := op.Invoke(ctx, m.FullMethod, opReq, outputOf(t, m.FullMethod))
				if heldID(agentErr) != "" {
					held++
				}
				if status.Code(opErr) != codes.InvalidArgument {
					continue
				}
				refused++
				// Refused as invalid, or by the principal check before any
				// guard is consulted (runner tokens may not mint tokens);
				// never held.
				outright := status.Code(agentErr) == codes.PermissionDenied && strings.Contains(status.Convert(agentErr).Message(), "tokens may not call")
				if (status.Code(agentErr) != codes.InvalidArgument && !outright) || holdCount(t, agentSrv) != n {
					t.Errorf("%s %s (agent of %s): the handler refuses it (%v) but the agent's call got %v",
						m.FullMethod, label, group, status.Convert(opErr).Message(), agentErr)
				}
			}
		}
	}
	t.Logf("%d holdable admin RPCs: %d invalid requests refused, %d valid ones held", methods, refused, held)
	if methods < 20 || refused < 100 || held < 20 {
		t.Fatalf("the walk reached too little: %d methods, %d refusals, %d holds", methods, refused, held)
	}
}
