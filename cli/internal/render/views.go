package render

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/holdview"
)

// col is one table column (and one line of an object's block). A wide
// column is printed only with -o wide (and in an object's block): the ids
// behind the names the table shows.
type col struct {
	header string
	get    func(proto.Message, env) string
	wide   bool
}

// env is what a column may use besides its message: who is who, the
// reader, and the time ages are measured to.
type env struct {
	names  holdview.Names
	viewer string
	now    time.Time
}

// view is how one message type prints: its columns, extra lines shown only
// for a single object, and the id -q prints.
type view struct {
	cols   []col
	detail []col
	id     func(proto.Message) string
}

func c[T proto.Message](header string, get func(T) string) col {
	return col{header: header, get: func(m proto.Message, _ env) string { return get(m.(T)) }}
}

// cx is a column that reads names (or the reader, or the time).
func cx[T proto.Message](header string, get func(T, env) string) col {
	return col{header: header, get: func(m proto.Message, e env) string { return get(m.(T), e) }}
}

// wide marks a column -o wide only.
func wide(cl col) col {
	cl.wide = true
	return cl
}

func idOf[T proto.Message](get func(T) string) func(proto.Message) string {
	return func(m proto.Message) string { return get(m.(T)) }
}

// group is a group by name (its id when the name is not known).
func (e env) group(id string) string { return holdview.Group(e.names, id) }

// user is a user by display name (their id when none is known).
func (e env) user(id string) string { return holdview.User(e.names, id) }

// approvers names escalation targets: users, and "group:<id>" as "admins
// of <group>"; "nobody" for none.
func (e env) approvers(ids []string) string {
	var out []string
	for _, id := range ids {
		if g, ok := strings.CutPrefix(id, "group:"); ok {
			out = append(out, "admins of "+e.group(g))
		} else {
			out = append(out, e.user(id))
		}
	}
	if len(out) == 0 {
		return "nobody"
	}
	return strings.Join(out, ", ")
}

// escalation is a plan in a few words ("remind 10m, escalate 30m to
// Erin"), "" when there is none.
func (e env) escalation(remind, escalate *durationpb.Duration, to []string) string {
	var parts []string
	if remind != nil {
		parts = append(parts, "remind "+shortDuration(remind.AsDuration()))
	}
	if escalate != nil {
		parts = append(parts, "escalate "+shortDuration(escalate.AsDuration())+" to "+e.approvers(to))
	}
	return strings.Join(parts, ", ")
}

// shortDuration is 10m, 1h30m, 45s: Go's form without zero units.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// named is "Name (id)", or the id alone when no name is known: an
// object's block shows both.
func named(name, id string) string {
	if name == "" || name == id {
		return id
	}
	return name + " (" + id + ")"
}

var views = map[protoreflect.FullName]view{}

func register[T proto.Message](v view) {
	var zero T
	views[zero.ProtoReflect().Descriptor().FullName()] = v
}

func viewOf(m proto.Message) view {
	if v, ok := views[m.ProtoReflect().Descriptor().FullName()]; ok {
		return v
	}
	// Fallback for a message with no view: its JSON on one line.
	return view{
		cols: []col{{header: "VALUE", get: func(m proto.Message, _ env) string { return compactJSON(m) }}},
		id:   func(proto.Message) string { return "" },
	}
}

// names0 is the names, or none (a nil Names answers "" for every id).
func (e env) names0() holdview.Names {
	if e.names == nil {
		return noNames{}
	}
	return e.names
}

type noNames struct{}

func (noNames) GroupName(string) string { return "" }
func (noNames) UserName(string) string  { return "" }

// modeWord prints an enforcement mode; unspecified prints as def.
func modeWord(m guardv1.EnforcementMode, def string) string {
	if m == guardv1.EnforcementMode_ENFORCEMENT_MODE_UNSPECIFIED {
		return def
	}
	return enumword.String(m)
}

// Quorum says where a hold's approvals stand: "1 of 2 (telegram:dana)";
// an approver no longer eligible is listed but not counted ("1 of 2
// (telegram:dana [no longer eligible: not counted], telegram:carol)"); ""
// for a hold that needs one approval.
func Quorum(h *guardv1.Hold) string {
	if h.GetApprovalsRequired() <= 1 {
		return ""
	}
	names := make([]string, 0, len(h.GetApprovals()))
	counted := 0
	for _, a := range h.GetApprovals() {
		if a.GetIneligible() {
			names = append(names, a.GetUserId()+" [no longer eligible: not counted]")
			continue
		}
		counted++
		names = append(names, a.GetUserId())
	}
	out := fmt.Sprintf("%d of %d", counted, h.GetApprovalsRequired())
	if len(names) > 0 {
		out += " (" + strings.Join(names, ", ") + ")"
	}
	return out
}

func init() {
	register[*guardv1.Group](view{
		cols: []col{
			c("ID", (*guardv1.Group).GetId),
			c("NAME", (*guardv1.Group).GetName),
			c("CLI SCOPE", func(g *guardv1.Group) string { return enumword.String(g.GetConfig().GetCliScope()) }),
			c("BASE IMAGE", (*guardv1.Group).GetBaseImage),
			c("PINNED HOST", (*guardv1.Group).GetPinnedHost),
			c("CREATED", func(g *guardv1.Group) string { return Time(g.GetCreatedAt()) }),
		},
		detail: []col{
			c("CPUS", func(g *guardv1.Group) string { return g.GetConfig().GetCpus() }),
			c("MEMORY", func(g *guardv1.Group) string { return g.GetConfig().GetMemory() }),
			c("APT PACKAGES", func(g *guardv1.Group) string { return strings.Join(g.GetConfig().GetAptPackages(), " ") }),
			c("NPM PACKAGES", func(g *guardv1.Group) string { return strings.Join(g.GetConfig().GetNpmPackages(), " ") }),
			c("MCP SERVERS", func(g *guardv1.Group) string { return mcpNames(g.GetConfig().GetMcpServers()) }),
			c("CONFIG VERSION", func(g *guardv1.Group) string { return num(g.GetConfig().GetVersion()) }),
		},
		id: idOf((*guardv1.Group).GetId),
	})
	register[*guardv1.GroupConfig](view{
		cols: []col{
			c("VERSION", func(g *guardv1.GroupConfig) string { return num(g.GetVersion()) }),
			c("CLI SCOPE", func(g *guardv1.GroupConfig) string { return enumword.String(g.GetCliScope()) }),
			c("CPUS", (*guardv1.GroupConfig).GetCpus),
			c("MEMORY", (*guardv1.GroupConfig).GetMemory),
			c("APT PACKAGES", func(g *guardv1.GroupConfig) string { return strings.Join(g.GetAptPackages(), " ") }),
			c("NPM PACKAGES", func(g *guardv1.GroupConfig) string { return strings.Join(g.GetNpmPackages(), " ") }),
			c("MCP SERVERS", func(g *guardv1.GroupConfig) string { return mcpNames(g.GetMcpServers()) }),
		},
		detail: []col{
			c("HOLD APPROVALS", func(g *guardv1.GroupConfig) string {
				if g.GetHoldApprovals() == 0 {
					return "default"
				}
				return num(int64(g.GetHoldApprovals()))
			}),
			c("AGENT COMMAND", func(g *guardv1.GroupConfig) string {
				if len(g.GetAgentCommand()) == 0 {
					return "the image's"
				}
				return strings.Join(g.GetAgentCommand(), " ")
			}),
			c("AGENT ENV", func(g *guardv1.GroupConfig) string { return keyValues(g.GetAgentEnv()) }),
		},
		id: idOf(func(g *guardv1.GroupConfig) string { return num(g.GetVersion()) }),
	})
	register[*guardv1.Session](view{
		cols: []col{
			c("ID", (*guardv1.Session).GetId),
			cx("GROUP", func(x *guardv1.Session, e env) string { return e.group(x.GetAgentGroupId()) }),
			wide(c("GROUP ID", (*guardv1.Session).GetAgentGroupId)),
			c("MESSAGING GROUP", (*guardv1.Session).GetMessagingGroupId),
			c("RUNNER", (*guardv1.Session).GetRunnerId),
			c("STATUS", func(s *guardv1.Session) string { return enumword.String(s.GetStatus()) }),
			c("LAST ACTIVE", func(s *guardv1.Session) string { return Time(s.GetLastActiveAt()) }),
		},
		detail: []col{c("CREATED", func(s *guardv1.Session) string { return Time(s.GetCreatedAt()) })},
		id:     idOf((*guardv1.Session).GetId),
	})
	register[*guardv1.SessionEvent](view{
		cols: []col{
			c("ID", func(e *guardv1.SessionEvent) string { return num(e.GetId()) }),
			c("AT", func(e *guardv1.SessionEvent) string { return Time(e.GetAt()) }),
			c("DIRECTION", (*guardv1.SessionEvent).GetDirection),
			c("KIND", (*guardv1.SessionEvent).GetKind),
			c("BODY", func(e *guardv1.SessionEvent) string { return Truncate(structJSON(e.GetBody()), 80) }),
		},
		id: idOf(func(e *guardv1.SessionEvent) string { return num(e.GetId()) }),
	})
	register[*guardv1.Destination](view{
		cols: []col{
			cx("GROUP", func(d *guardv1.Destination, e env) string { return e.group(d.GetGroup()) }),
			wide(c("GROUP ID", (*guardv1.Destination).GetGroup)),
			c("NAME", (*guardv1.Destination).GetName),
			cx("TARGET", func(d *guardv1.Destination, e env) string {
				if d.GetTargetMessagingGroup() != "" {
					return "messaging-group " + d.GetTargetMessagingGroup()
				}
				return "group " + e.group(d.GetTargetGroup())
			}),
			wide(c("TARGET ID", func(d *guardv1.Destination) string { return d.GetTargetGroup() + d.GetTargetMessagingGroup() })),
		},
		id: idOf((*guardv1.Destination).GetName),
	})
	register[*guardv1.Member](view{
		cols: []col{
			cx("GROUP", func(m *guardv1.Member, e env) string { return e.group(m.GetGroup()) }),
			wide(c("GROUP ID", (*guardv1.Member).GetGroup)),
			c("USER", (*guardv1.Member).GetUserId),
			cx("NAME", func(m *guardv1.Member, e env) string { return e.names0().UserName(m.GetUserId()) }),
			c("ADDED", func(m *guardv1.Member) string { return Time(m.GetAddedAt()) }),
		},
		id: idOf((*guardv1.Member).GetUserId),
	})
	register[*guardv1.RoleGrant](view{
		cols: []col{
			c("USER", (*guardv1.RoleGrant).GetUserId),
			cx("NAME", func(r *guardv1.RoleGrant, e env) string { return e.names0().UserName(r.GetUserId()) }),
			c("ROLE", func(r *guardv1.RoleGrant) string { return enumword.String(r.GetRole()) }),
			c("SCOPE", func(r *guardv1.RoleGrant) string { return enumword.String(r.GetScope()) }),
			cx("GROUP", func(r *guardv1.RoleGrant, e env) string { return e.group(r.GetGroup()) }),
			wide(c("GROUP ID", (*guardv1.RoleGrant).GetGroup)),
			c("GRANTED", func(r *guardv1.RoleGrant) string { return Time(r.GetGrantedAt()) }),
		},
		id: idOf((*guardv1.RoleGrant).GetUserId),
	})
	register[*guardv1.User](view{
		cols: []col{
			c("ID", (*guardv1.User).GetId),
			c("DISPLAY NAME", (*guardv1.User).GetDisplayName),
			c("CREATED", func(u *guardv1.User) string { return Time(u.GetCreatedAt()) }),
			c("OIDC", func(u *guardv1.User) string {
				var b []string
				for _, o := range u.GetOidcBindings() {
					b = append(b, o.GetIssuer()+" "+o.GetSubject())
				}
				return strings.Join(b, ", ")
			}),
		},
		id: idOf((*guardv1.User).GetId),
	})
	register[*guardv1.OidcBinding](view{
		cols: []col{
			c("USER", (*guardv1.OidcBinding).GetUserId),
			c("ISSUER", (*guardv1.OidcBinding).GetIssuer),
			c("SUBJECT", (*guardv1.OidcBinding).GetSubject),
			c("CREATED", func(o *guardv1.OidcBinding) string { return Time(o.GetCreatedAt()) }),
		},
		id: idOf((*guardv1.OidcBinding).GetSubject),
	})
	register[*guardv1.Wiring](view{
		cols: []col{
			c("ID", (*guardv1.Wiring).GetId),
			c("MESSAGING GROUP", (*guardv1.Wiring).GetMessagingGroup),
			cx("GROUP", func(w *guardv1.Wiring, e env) string { return e.group(w.GetGroup()) }),
			wide(c("GROUP ID", (*guardv1.Wiring).GetGroup)),
			c("CREATED", func(w *guardv1.Wiring) string { return Time(w.GetCreatedAt()) }),
		},
		id: idOf((*guardv1.Wiring).GetId),
	})
	register[*guardv1.MessagingGroup](view{
		cols: []col{
			c("ID", (*guardv1.MessagingGroup).GetId),
			c("CHANNEL", (*guardv1.MessagingGroup).GetChannelType),
			c("PLATFORM ID", (*guardv1.MessagingGroup).GetPlatformId),
			c("NAME", (*guardv1.MessagingGroup).GetName),
			c("UNKNOWN SENDERS", func(m *guardv1.MessagingGroup) string { return enumword.String(m.GetUnknownSenderPolicy()) }),
			c("GROUP CHAT", func(m *guardv1.MessagingGroup) string { return yesNo(m.GetIsGroup()) }),
			c("DENIED", func(m *guardv1.MessagingGroup) string { return yesNo(m.GetDenied()) }),
		},
		detail: []col{c("CREATED", func(m *guardv1.MessagingGroup) string { return Time(m.GetCreatedAt()) })},
		id:     idOf((*guardv1.MessagingGroup).GetId),
	})
	register[*guardv1.MessagePolicy](view{
		cols: []col{
			cx("FROM", func(p *guardv1.MessagePolicy, e env) string { return e.group(p.GetFromGroup()) }),
			cx("TO", func(p *guardv1.MessagePolicy, e env) string { return e.group(p.GetToGroup()) }),
			wide(c("FROM ID", (*guardv1.MessagePolicy).GetFromGroup)),
			wide(c("TO ID", (*guardv1.MessagePolicy).GetToGroup)),
			cx("APPROVERS", func(p *guardv1.MessagePolicy, e env) string {
				var out []string
				for _, u := range append([]string{p.GetApproverUserId()}, p.GetAlsoApproverUserIds()...) {
					out = append(out, e.user(u))
				}
				return strings.Join(out, ", ")
			}),
			wide(c("APPROVER IDS", func(p *guardv1.MessagePolicy) string {
				return strings.Join(append([]string{p.GetApproverUserId()}, p.GetAlsoApproverUserIds()...), ", ")
			})),
			c("APPROVALS", func(p *guardv1.MessagePolicy) string { return fmt.Sprint(max(p.GetApprovals(), 1)) }),
			c("MODE", func(p *guardv1.MessagePolicy) string { return modeWord(p.GetMode(), "inherit") }),
			cx("ESCALATION", func(p *guardv1.MessagePolicy, e env) string {
				return e.escalation(p.GetRemindAfter(), p.GetEscalateAfter(), p.GetEscalateTo())
			}),
		},
		id: idOf(func(p *guardv1.MessagePolicy) string { return p.GetFromGroup() + " " + p.GetToGroup() }),
	})
	register[*guardv1.McpServerInfo](view{
		cols: []col{
			c("SERVER", (*guardv1.McpServerInfo).GetName),
			c("COMMAND", func(m *guardv1.McpServerInfo) string {
				return strings.TrimSpace(m.GetCommand() + " " + strings.Join(m.GetArgs(), " "))
			}),
			c("IMAGE", func(m *guardv1.McpServerInfo) string { return orDash(m.GetImage()) }),
			c("DEFAULT", func(m *guardv1.McpServerInfo) string {
				if m.GetDefaultEffect() == guardv1.Effect_EFFECT_UNSPECIFIED {
					return "hold (unset)"
				}
				return enumword.String(m.GetDefaultEffect())
			}),
			c("APPROVALS", func(m *guardv1.McpServerInfo) string { return fmt.Sprint(max(m.GetApprovals(), 1)) }),
			c("MODE", func(m *guardv1.McpServerInfo) string { return modeWord(m.GetMode(), "inherit") }),
			c("STATUS", func(m *guardv1.McpServerInfo) string {
				if len(m.GetRunners()) == 0 {
					return "not started"
				}
				var parts []string
				for _, r := range m.GetRunners() {
					p := r.GetRunnerId() + ": " + r.GetState()
					if r.GetState() == "running" {
						p += fmt.Sprintf(" (%d tools)", r.GetTools())
					}
					if r.GetError() != "" {
						p += " — " + r.GetError()
					}
					parts = append(parts, p)
				}
				return strings.Join(parts, "; ")
			}),
		},
		id: idOf((*guardv1.McpServerInfo).GetName),
	})
	register[*guardv1.McpToolInfo](view{
		cols: []col{
			c("TOOL", (*guardv1.McpToolInfo).GetTool),
			c("EFFECT", func(m *guardv1.McpToolInfo) string { return enumword.String(m.GetEffect()) }),
			c("FROM", func(m *guardv1.McpToolInfo) string {
				return map[guardv1.McpEffectSource]string{
					guardv1.McpEffectSource_MCP_EFFECT_SOURCE_TOOL:           "tool setting",
					guardv1.McpEffectSource_MCP_EFFECT_SOURCE_SERVER_DEFAULT: "server default",
					guardv1.McpEffectSource_MCP_EFFECT_SOURCE_BUILT_IN:       "unset (hold)",
				}[m.GetSource()]
			}),
			c("APPROVALS", func(m *guardv1.McpToolInfo) string { return fmt.Sprint(max(m.GetApprovals(), 1)) }),
			c("MODE", func(m *guardv1.McpToolInfo) string { return modeWord(m.GetMode(), "inherit") }),
			c("SEEN", func(m *guardv1.McpToolInfo) string {
				if m.GetLastSeen() == nil {
					return "never (set ahead)"
				}
				return m.GetLastSeen().AsTime().UTC().Format("2006-01-02 15:04Z")
			}),
			c("DESCRIPTION", (*guardv1.McpToolInfo).GetDescription),
		},
		id: idOf((*guardv1.McpToolInfo).GetTool),
	})
	register[*guardv1.UserDm](view{
		cols: []col{
			c("USER", (*guardv1.UserDm).GetUserId),
			cx("NAME", func(d *guardv1.UserDm, e env) string { return e.names0().UserName(d.GetUserId()) }),
			c("CHANNEL", (*guardv1.UserDm).GetChannelType),
			c("ADDRESS", (*guardv1.UserDm).GetAddress),
		},
		id: idOf((*guardv1.UserDm).GetUserId),
	})
	register[*guardv1.Token](view{
		cols: []col{
			c("ID", (*guardv1.Token).GetId),
			c("KIND", func(t *guardv1.Token) string { return enumword.String(t.GetKind()) }),
			c("NAME", (*guardv1.Token).GetName),
			c("RUNNER", (*guardv1.Token).GetRunnerId),
			c("USER", (*guardv1.Token).GetUserId),
			c("CREATED", func(t *guardv1.Token) string { return Time(t.GetCreatedAt()) }),
			c("REVOKED", func(t *guardv1.Token) string { return Time(t.GetRevokedAt()) }),
			c("EXPIRES", func(t *guardv1.Token) string { return Time(t.GetExpiresAt()) }),
			c("LAST USED", func(t *guardv1.Token) string { return Time(t.GetLastUsedAt()) }),
		},
		id: idOf((*guardv1.Token).GetId),
	})
	register[*guardv1.Freeze](view{
		cols: []col{
			c("SCOPE", func(f *guardv1.Freeze) string { return enumword.String(f.GetScope()) }),
			cx("TARGET", func(f *guardv1.Freeze, e env) string {
				if f.GetGroup() != "" {
					return e.names0().GroupName(f.GetGroup())
				}
				return f.GetRunner()
			}),
			c("FROZEN BY", (*guardv1.Freeze).GetFrozenBy),
			c("SINCE", func(f *guardv1.Freeze) string { return Time(f.GetFrozenAt()) }),
			c("REASON", (*guardv1.Freeze).GetReason),
		},
		id: idOf(func(f *guardv1.Freeze) string {
			return enumword.String(f.GetScope()) + ":" + f.GetGroup() + f.GetRunner()
		}),
	})
	register[*guardv1.StandingGrant](view{
		cols: []col{
			c("ID", (*guardv1.StandingGrant).GetId),
			c("ACTION", (*guardv1.StandingGrant).GetCatalogAction),
			cx("GROUP", func(g *guardv1.StandingGrant, e env) string { return e.group(g.GetAgentGroupId()) }),
			cx("RESOURCE", func(g *guardv1.StandingGrant, e env) string { return holdview.Words(e.names, kv(g.GetResource())) }),
			cx("APPROVED BY", func(g *guardv1.StandingGrant, e env) string {
				var names []string
				for _, u := range g.GetApprovedBy() {
					names = append(names, e.user(u))
				}
				return strings.Join(names, ", ")
			}),
			c("UNTIL", func(g *guardv1.StandingGrant) string { return Time(g.GetExpiresAt()) }),
			c("SESSION", func(g *guardv1.StandingGrant) string { return cell(g.GetSessionId()) }),
			c("USES", func(g *guardv1.StandingGrant) string { return num(g.GetUses()) }),
			c("REVOKED", func(g *guardv1.StandingGrant) string { return Time(g.GetRevokedAt()) }),
		},
		detail: []col{
			c("HOLD", (*guardv1.StandingGrant).GetHoldId),
			c("KIND", (*guardv1.StandingGrant).GetKind),
			c("CREATED", func(g *guardv1.StandingGrant) string { return Time(g.GetCreatedAt()) }),
			cx("REVOKED BY", func(g *guardv1.StandingGrant, e env) string { return e.user(g.GetRevokedBy()) }),
			c("LAST USED", func(g *guardv1.StandingGrant) string { return Time(g.GetLastUsedAt()) }),
		},
		id: idOf((*guardv1.StandingGrant).GetId),
	})
	register[*guardv1.Runner](view{
		cols: []col{
			c("ID", (*guardv1.Runner).GetId),
			c("HOST", (*guardv1.Runner).GetHost),
			c("VERSION", (*guardv1.Runner).GetVersion),
			c("LIVE", func(r *guardv1.Runner) string { return yesNo(r.GetLive()) }),
			c("SESSIONS", func(r *guardv1.Runner) string { return num(int64(r.GetSessions())) }),
			c("LEASE EXPIRES", func(r *guardv1.Runner) string { return Time(r.GetLeaseExpiresAt()) }),
			c("CAPABILITIES", func(r *guardv1.Runner) string { return strings.Join(r.GetCapabilities(), ",") }),
		},
		detail: []col{
			c("REGISTERED", func(r *guardv1.Runner) string { return Time(r.GetRegisteredAt()) }),
			c("LABELS", func(r *guardv1.Runner) string { return kv(r.GetLabels()) }),
			c("DELIVERY ACTIONS", func(r *guardv1.Runner) string {
				var parts []string
				for _, d := range r.GetDeliveryActions() {
					parts = append(parts, d.GetName()+"→"+cell(d.GetCatalogAction()))
				}
				return strings.Join(parts, " ")
			}),
		},
		id: idOf((*guardv1.Runner).GetId),
	})
	register[*guardv1.CatalogEntry](view{
		cols: []col{
			c("ACTION", (*guardv1.CatalogEntry).GetAction),
			c("ACCESS", func(e *guardv1.CatalogEntry) string { return enumword.String(e.GetAccess()) }),
			c("APPROVAL ACTION", (*guardv1.CatalogEntry).GetApprovalAction),
			c("RESOURCE", (*guardv1.CatalogEntry).GetResource),
			c("MODE", func(e *guardv1.CatalogEntry) string { return modeWord(e.GetMode(), "enforce") }),
			c("APPROVALS", func(e *guardv1.CatalogEntry) string {
				if e.GetApprovals() == 0 {
					return "default"
				}
				return fmt.Sprint(e.GetApprovals())
			}),
			c("STEP-UP", func(e *guardv1.CatalogEntry) string { return yesNo(e.GetStepUp()) }),
			cx("ESCALATION", func(c *guardv1.CatalogEntry, e env) string {
				return e.escalation(c.GetRemindAfter(), c.GetEscalateAfter(), c.GetEscalateTo())
			}),
			c("DESCRIPTION", (*guardv1.CatalogEntry).GetDescription),
		},
		id: idOf((*guardv1.CatalogEntry).GetAction),
	})
	register[*guardv1.DecisionRecord](view{
		cols: []col{
			c("ID", (*guardv1.DecisionRecord).GetId),
			c("AT", func(d *guardv1.DecisionRecord) string { return Time(d.GetAt()) }),
			c("ACTION", (*guardv1.DecisionRecord).GetAction),
			cx("ACTOR", func(d *guardv1.DecisionRecord, e env) string { return ActorNamed(d.GetActor(), e.names) }),
			wide(c("ACTOR ID", func(d *guardv1.DecisionRecord) string { return Actor(d.GetActor()) })),
			c("EFFECT", func(d *guardv1.DecisionRecord) string { return enumword.String(d.GetEffect()) }),
			c("DECIDED BY", (*guardv1.DecisionRecord).GetDecidedBy),
			c("HOLD", (*guardv1.DecisionRecord).GetHoldId),
			cx("REASON", func(d *guardv1.DecisionRecord, e env) string {
				r := holdview.Words(e.names, d.GetReason())
				if d.GetDryRun() {
					r = "(dry run) " + r
				}
				return r
			}),
		},
		detail: []col{
			c("GRANT", (*guardv1.DecisionRecord).GetGrant),
			c("MODE", (*guardv1.DecisionRecord).GetMode),
			cx("ENFORCE WOULD", func(d *guardv1.DecisionRecord, e env) string {
				if d.GetMode() == "" {
					return ""
				}
				return enumword.String(d.GetWouldEffect()) + ": " + holdview.Words(e.names, d.GetWouldReason())
			}),
			c("LATENCY", func(d *guardv1.DecisionRecord) string { return Duration(d.GetLatency()) }),
		},
		id: idOf((*guardv1.DecisionRecord).GetId),
	})
	register[*guardv1.Hold](view{
		cols: []col{
			c("ID", (*guardv1.Hold).GetId),
			c("STATUS", func(h *guardv1.Hold) string { return enumword.String(h.GetStatus()) }),
			c("KIND", (*guardv1.Hold).GetKind),
			cx("GROUP", func(h *guardv1.Hold, e env) string { return e.group(h.GetAgentGroupId()) }),
			cx("ASKS", func(h *guardv1.Hold, e env) string { return holdview.Summary(h, e.names) }),
			cx("REQUESTER", func(h *guardv1.Hold, e env) string { return holdview.Requester(h.GetRequester(), e.names) }),
			cx("AGE", func(h *guardv1.Hold, e env) string { return Ago(h.GetCreatedAt(), e.now) }),
			cx("APPROVALS", func(h *guardv1.Hold, e env) string { return holdview.Progress(h, e.viewer) }),
			wide(c("ACTION", (*guardv1.Hold).GetCatalogAction)),
			wide(c("GROUP ID", (*guardv1.Hold).GetAgentGroupId)),
			wide(cx("APPROVER", func(h *guardv1.Hold, e env) string { return RuleNamed(h.GetApproverRule(), e.names) })),
			wide(c("SCOPE", func(h *guardv1.Hold) string { return enumword.String(h.GetApproverScope()) })),
			wide(c("CREATED", func(h *guardv1.Hold) string { return Time(h.GetCreatedAt()) })),
			wide(c("TITLE", func(h *guardv1.Hold) string { return Truncate(h.GetTitle(), 60) })),
		},
		detail: []col{
			c("QUESTION", (*guardv1.Hold).GetQuestion),
			cx("APPROVED BY", func(h *guardv1.Hold, e env) string {
				if len(h.GetApprovals()) == 0 && h.GetStatus() == guardv1.HoldStatus_HOLD_STATUS_APPROVED {
					// A hold of one approval: its resolver approved it.
					return named(e.names0().UserName(h.GetResolver()), h.GetResolver())
				}
				var out []string
				for _, a := range h.GetApprovals() {
					who := named(e.names0().UserName(a.GetUserId()), a.GetUserId())
					if a.GetIneligible() {
						who += " [no longer eligible: not counted]"
					}
					out = append(out, who)
				}
				return strings.Join(out, ", ")
			}),
			c("OPTIONS", func(h *guardv1.Hold) string {
				var parts []string
				for _, o := range h.GetOptions() {
					parts = append(parts, o.GetLabel()+"="+o.GetValue())
				}
				return strings.Join(parts, " ")
			}),
			c("REQUESTER ID", func(h *guardv1.Hold) string { return Actor(h.GetRequester()) }),
			c("SESSION", (*guardv1.Hold).GetSessionId),
			cx("DELIVERED TO", func(h *guardv1.Hold, e env) string {
				return named(e.names0().UserName(h.GetDeliveredTo()), h.GetDeliveredTo())
			}),
			c("AWAITING", func(h *guardv1.Hold) string {
				if u := h.GetAwaitingReasonFrom(); u != "" {
					return "reject reason from " + u
				}
				return ""
			}),
			c("EXPIRES", func(h *guardv1.Hold) string { return Time(h.GetExpiresAt()) }),
			c("REMINDED", func(h *guardv1.Hold) string {
				if h.GetRemindedAt() != nil {
					return Time(h.GetRemindedAt())
				}
				if h.GetRemindAt() != nil && h.GetStatus() == guardv1.HoldStatus_HOLD_STATUS_PENDING {
					return "due " + Time(h.GetRemindAt())
				}
				return ""
			}),
			cx("ESCALATED", func(h *guardv1.Hold, e env) string {
				if h.GetEscalatedAt() != nil {
					return Time(h.GetEscalatedAt()) + " to " + e.approvers(h.GetEscalatedTo())
				}
				if h.GetEscalateAt() != nil && h.GetStatus() == guardv1.HoldStatus_HOLD_STATUS_PENDING {
					return "due " + Time(h.GetEscalateAt()) + " to " + e.approvers(h.GetEscalateTo())
				}
				return ""
			}),
			c("RESOLVED", func(h *guardv1.Hold) string { return Time(h.GetResolvedAt()) }),
			cx("RESOLVER", func(h *guardv1.Hold, e env) string {
				return named(e.names0().UserName(h.GetResolver()), h.GetResolver())
			}),
			c("CHOICE", (*guardv1.Hold).GetChoice),
			c("REASON", (*guardv1.Hold).GetReason),
			c("CONSUMED", func(h *guardv1.Hold) string { return yesNo(h.GetConsumed()) }),
			cx("NOT CARRIED OUT", func(h *guardv1.Hold, e env) string { return holdview.Words(e.names, h.GetUnappliedReason()) }),
			c("PAYLOAD", func(h *guardv1.Hold) string { return structJSON(h.GetPayload()) }),
		},
		id: idOf((*guardv1.Hold).GetId),
	})
	register[*guardv1.Decision](view{
		cols: []col{
			c("EFFECT", func(d *guardv1.Decision) string { return enumword.String(d.GetEffect()) }),
			cx("REASON", func(d *guardv1.Decision, e env) string { return holdview.Words(e.names, d.GetReason()) }),
			cx("APPROVER RULE", func(d *guardv1.Decision, e env) string { return RuleNamed(d.GetApproverRule(), e.names) }),
			c("APPROVER SCOPE", func(d *guardv1.Decision) string { return enumword.String(d.GetApproverScope()) }),
			c("DECIDED BY", (*guardv1.Decision).GetDecidedBy),
		},
		// A gate in audit or warn mode: what it answered, and what enforce would.
		detail: []col{
			c("MODE", (*guardv1.Decision).GetMode),
			cx("ENFORCE WOULD", func(d *guardv1.Decision, e env) string {
				if d.GetMode() == "" {
					return ""
				}
				return enumword.String(d.GetWouldEffect()) + ": " + holdview.Words(e.names, d.GetWouldReason())
			}),
		},
		id: idOf(func(d *guardv1.Decision) string { return enumword.String(d.GetEffect()) }),
	})
}

// Time prints a timestamp in UTC to the second; absent → "".
func Time(t *timestamppb.Timestamp) string {
	if t == nil {
		return ""
	}
	return t.AsTime().UTC().Format(time.RFC3339)
}

// Duration prints a duration; absent → "".
func Duration(d *durationpb.Duration) string {
	if d == nil {
		return ""
	}
	return d.AsDuration().String()
}

// Actor prints an actor the way `ncl explain --actor` takes it.
func Actor(a *guardv1.Actor) string { return ActorNamed(a, nil) }

// ActorNamed is Actor with the agent's group by name where n knows it
// (`ncl explain --actor agent:research` takes that too).
func ActorNamed(a *guardv1.Actor, n holdview.Names) string {
	switch k := a.GetKind().(type) {
	case *guardv1.Actor_Host:
		return "host"
	case *guardv1.Actor_Agent:
		s := "agent:" + holdview.Group(n, k.Agent.GetAgentGroupId())
		if k.Agent.GetSessionId() != "" {
			s += ":" + k.Agent.GetSessionId()
		}
		return s
	case *guardv1.Actor_Human:
		return "human:" + k.Human.GetUserId()
	case *guardv1.Actor_System:
		return "system"
	}
	return ""
}

// Rule prints an approver rule: exclusive(user) or admins-of-scope(...).
func Rule(r *guardv1.ApproverRule) string { return RuleNamed(r, nil) }

// RuleNamed is Rule with users and the group by name where n knows them.
func RuleNamed(r *guardv1.ApproverRule, n holdview.Names) string {
	plus := ""
	for _, u := range r.GetEscalatedUserIds() {
		plus += " + " + holdview.User(n, u)
	}
	switch k := r.GetKind().(type) {
	case *guardv1.ApproverRule_Exclusive:
		var who []string
		for _, u := range append([]string{k.Exclusive.GetUserId()}, k.Exclusive.GetAlsoUserIds()...) {
			who = append(who, holdview.User(n, u))
		}
		return "exclusive(" + strings.Join(who, ", ") + ")" + plus
	case *guardv1.ApproverRule_AdminsOfScope:
		anchor := "global"
		if g := k.AdminsOfScope.GetAgentGroupId(); g != "" {
			anchor = "group " + holdview.Group(n, g)
		}
		if d := k.AdminsOfScope.GetDeliveredTo(); d != "" {
			anchor += ", delivered to " + holdview.User(n, d)
		}
		return "admins-of-scope(" + anchor + ")" + plus
	}
	return ""
}

// Ago is how long before now t was: "42s ago", "5m ago", "3h05m ago",
// "4d ago" ("" for none).
func Ago(t *timestamppb.Timestamp, now time.Time) string {
	if t == nil {
		return ""
	}
	d := max(now.Sub(t.AsTime()), 0)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm ago", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

// Truncate shortens s to n runes with an ellipsis.
func Truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func mcpNames(servers []*guardv1.McpServer) string {
	names := make([]string, len(servers))
	for i, s := range servers {
		names[i] = s.GetName()
	}
	return strings.Join(names, " ")
}

func kv(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}

func structJSON(s *structpb.Struct) string {
	if s == nil || len(s.GetFields()) == 0 {
		return ""
	}
	b, err := json.Marshal(s.AsMap())
	if err != nil {
		return "<unprintable>"
	}
	return string(b)
}

func compactJSON(m proto.Message) string {
	v, err := JSONValue(m)
	if err != nil {
		return "<unprintable>"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func num(n int64) string { return fmt.Sprintf("%d", n) }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
