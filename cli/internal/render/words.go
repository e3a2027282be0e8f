package render

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/holdcard"
	"github.com/clawguard/clawguard/proto/holdview"
)

// The words columns are made of: times, actors, rules, ages, and the
// small conversions every view shares.

// Named is "Name (id)", or the id alone when no name is known: an
// object's block shows both.
func Named(name, id string) string {
	if name == "" || name == id {
		return id
	}
	return name + " (" + id + ")"
}

// ModeWord prints an enforcement mode; unspecified prints as def.
func ModeWord(m guardv1.EnforcementMode, def string) string {
	if m == guardv1.EnforcementMode_ENFORCEMENT_MODE_UNSPECIFIED {
		return def
	}
	return enumword.String(m)
}

// Quorum says where a hold's approvals stand (its card's quorum): "1 of 2
// (telegram:dana)"; an approver no longer eligible is listed but not
// counted ("1 of 2 (telegram:dana [no longer eligible: not counted],
// telegram:carol)"); "" for a hold that needs one approval.
func Quorum(h *guardv1.Hold) string {
	q := holdcard.Of(h).Quorum
	if q.Required <= 1 {
		return ""
	}
	names := make([]string, 0, len(q.Approvals))
	for _, a := range q.Approvals {
		if !a.Counts {
			names = append(names, a.User+" [no longer eligible: not counted]")
			continue
		}
		names = append(names, a.User)
	}
	out := fmt.Sprintf("%d of %d", q.Counted, q.Required)
	if len(names) > 0 {
		out += " (" + strings.Join(names, ", ") + ")"
	}
	return out
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

// KV prints a map as sorted key=value pairs joined by commas.
func KV(m map[string]string) string {
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

// StructJSON is a payload as one line of JSON ("" for none).
func StructJSON(s *structpb.Struct) string {
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

// Num prints an integer.
func Num(n int64) string { return fmt.Sprintf("%d", n) }

// YesNo prints a flag.
func YesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// OrDash prints "-" for nothing.
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Micros is an amount of micro-units as a person reads it ("3.75", "0").
func Micros(m int64) string {
	s := strings.TrimRight(fmt.Sprintf("%d.%06d", m/1_000_000, m%1_000_000), "0")
	return strings.TrimSuffix(s, ".")
}
