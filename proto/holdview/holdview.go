// Package holdview is a hold as a person reads it in a list: one line that
// says what is asked (built from the hold's kind, resource and payload),
// who asks, and where its quorum stands — with groups and users by name
// where the caller knows them. `ncl approvals list` and the console's
// pending list both print these, so an approver reads the same words in
// either. RuleWords says who may decide a hold (the guard's explanations
// and the console's hold page); holdcard builds a hold's card from these.
package holdview

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/mcpcall"
)

// Names turns ids into what people call them: "" when the name is not
// known (not readable by the caller, or none set), and the id is shown.
type Names interface {
	GroupName(id string) string
	UserName(id string) string
}

// Group is a group's name, else its id.
func Group(n Names, id string) string {
	if n != nil && id != "" {
		if name := n.GroupName(id); name != "" {
			return name
		}
	}
	return id
}

// User is a user's display name, else their id.
func User(n Names, id string) string {
	if n != nil && id != "" {
		if name := n.UserName(id); name != "" {
			return name
		}
	}
	return id
}

// MaxSummary bounds a summary, in runes: one line of a list.
const MaxSummary = 80

// Summary says in one line what the hold asks, by kind: "to ops: hello
// ops", "apt: cowsay", "mcp fs.write_file {"path":"/tmp/x"}", "ncl roles
// grant role=admin …". A kind it does not know is its title.
func Summary(h *guardv1.Hold, n Names) string {
	p := h.GetPayload()
	var s string
	switch h.GetKind() {
	case "a2a_message_gate":
		to := h.GetResource()["to"]
		if to == "" {
			to = str(p, "to")
		}
		text := str(p, "text")
		if text == "" {
			text = str(p, "content")
		}
		s = "to " + Group(n, to) + ": " + text
	case "install_packages":
		var parts []string
		for _, m := range []string{"apt", "npm"} {
			if pk := list(p, m); len(pk) > 0 {
				parts = append(parts, m+": "+strings.Join(pk, " "))
			}
		}
		s = strings.Join(parts, "; ")
	case "add_mcp_server":
		s = "mcp server " + str(p, "name") + ": " + strings.TrimSpace(str(p, "command")+" "+strings.Join(list(p, "args"), " "))
	case "create_agent":
		s = "new agent " + quote(str(p, "name"))
	case mcpcall.ApprovalKind:
		server, tool := h.GetResource()[mcpcall.KeyServer], h.GetResource()[mcpcall.KeyTool]
		if server == "" {
			server, tool = str(p, mcpcall.KeyServer), str(p, mcpcall.KeyTool)
		}
		s = "mcp " + server + "." + tool + " " + compact(p.GetFields()[mcpcall.KeyArguments])
	case "cli_command":
		s = command(p, n)
	case "sender_admit":
		who := str(p, "sender_name")
		if id := str(p, "sender_user_id"); who == "" {
			who = User(n, id)
		} else if id != "" {
			who += " (" + id + ")"
		}
		s = "admit " + who
		if g := str(p, "agent_group_id"); g != "" {
			s += " to " + Group(n, g)
		}
	case "channel_registration":
		s = "connect " + strings.TrimSpace(str(p, "channel_type")+" chat "+str(p, "platform_id"))
	}
	if strings.TrimSpace(s) == "" {
		s = h.GetTitle()
		if s == "" {
			s = h.GetKind()
		}
	}
	return clip(oneLine(s), MaxSummary)
}

// Requester says who asks: an agent by its group's name, a person by
// display name, else "operator" or "system".
func Requester(a *guardv1.Actor, n Names) string {
	switch k := a.GetKind().(type) {
	case *guardv1.Actor_Host:
		return "operator"
	case *guardv1.Actor_Agent:
		return "agent of " + Group(n, k.Agent.GetAgentGroupId())
	case *guardv1.Actor_Human:
		return User(n, k.Human.GetUserId())
	case *guardv1.Actor_System:
		return "system"
	}
	return ""
}

// Progress says where a hold's approvals stand: "0 of 1", "1 of 2 — you
// approved" (viewer is the reader's user id; "" when not known). An
// approval no longer eligible is not counted ("— yours no longer counts").
func Progress(h *guardv1.Hold, viewer string) string {
	need := max(h.GetApprovalsRequired(), 1)
	counted, mine := 0, ""
	for _, a := range h.GetApprovals() {
		if !a.GetIneligible() {
			counted++
		}
		if viewer != "" && a.GetUserId() == viewer {
			mine = " — you approved"
			if a.GetIneligible() {
				mine = " — yours no longer counts"
			}
		}
	}
	if h.GetStatus() == guardv1.HoldStatus_HOLD_STATUS_APPROVED && len(h.GetApprovals()) == 0 {
		counted = int(need) // a single approval is the resolution itself
		if viewer != "" && h.GetResolver() == viewer {
			mine = " — you approved"
		}
	}
	return fmt.Sprintf("%d of %d%s", counted, need, mine)
}

// Approved reports whether viewer's approval is on record for h.
func Approved(h *guardv1.Hold, viewer string) bool {
	for _, a := range h.GetApprovals() {
		if a.GetUserId() == viewer {
			return true
		}
	}
	return false
}

// GroupResourceKeys are the resource keys, per catalog action, whose value
// is an agent group: a what-if question may name the group there, and the
// client turns the name into the id before asking.
var GroupResourceKeys = map[string][]string{
	"a2a.send":      {"to"},
	"senders.admit": {"agent_group"},
}

// command is a cli_command hold's request as the command it runs:
// "ncl roles grant group=research role=admin …" (fields that name a group
// by their name).
func command(p *structpb.Struct, n Names) string {
	method := str(p, "method")
	if method == "" {
		return ""
	}
	verb := method
	var in protoreflect.MessageDescriptor
	if d, err := protoregistry.GlobalFiles.FindDescriptorByName(fullName(method)); err == nil {
		if md, ok := d.(protoreflect.MethodDescriptor); ok {
			in = md.Input()
			if r, ok := proto.GetExtension(md.Options(), guardv1.E_Rule).(*guardv1.Rule); ok && r.GetAction() != "" {
				verb = strings.ReplaceAll(r.GetAction(), ".", " ")
			}
		}
	}
	req := p.GetFields()["request"].GetStructValue().GetFields()
	keys := make([]string, 0, len(req))
	for k := range req {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := []string{"ncl " + verb}
	for _, k := range keys {
		v := req[k]
		val := compact(v)
		if s, ok := v.GetKind().(*structpb.Value_StringValue); ok {
			val = s.StringValue
			fd := field(in, k)
			switch {
			case fd == nil:
			case fd.Enum() != nil:
				// protojson writes an enum by its value name: print its word.
				if ev := fd.Enum().Values().ByName(protoreflect.Name(val)); ev != nil {
					if w, err := enumword.WordOf(fd.Enum(), ev.Number()); err == nil {
						val = w
					}
				}
			case namesGroup(fd):
				val = Group(n, val)
			}
		}
		parts = append(parts, k+"="+val)
	}
	return strings.Join(parts, " ")
}

// field is the request field a payload key names (proto or JSON name).
func field(in protoreflect.MessageDescriptor, k string) protoreflect.FieldDescriptor {
	if in == nil {
		return nil
	}
	if fd := in.Fields().ByName(protoreflect.Name(k)); fd != nil {
		return fd
	}
	return in.Fields().ByJSONName(k)
}

// namesGroup: the field is marked (guard.v1.names_group).
func namesGroup(fd protoreflect.FieldDescriptor) bool {
	marked, _ := proto.GetExtension(fd.Options(), guardv1.E_NamesGroup).(bool)
	return marked
}

// fullName turns "/pkg.Service/Method" into "pkg.Service.Method".
func fullName(fullMethod string) protoreflect.FullName {
	return protoreflect.FullName(strings.Replace(strings.TrimPrefix(fullMethod, "/"), "/", ".", 1))
}

func str(p *structpb.Struct, k string) string { return p.GetFields()[k].GetStringValue() }

func list(p *structpb.Struct, k string) []string {
	var out []string
	for _, v := range p.GetFields()[k].GetListValue().GetValues() {
		if s := v.GetStringValue(); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// compact is a value as one line of JSON ("" for none).
func compact(v *structpb.Value) string {
	if v == nil {
		return ""
	}
	b, err := json.Marshal(v.AsInterface())
	if err != nil {
		return ""
	}
	return string(b)
}

func quote(s string) string { return fmt.Sprintf("%q", s) }

// oneLine folds every run of white space (newlines included) to a space.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
