package render

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/clawguard/clawguard/proto/holdview"
)

// How a message type prints is its View: its table columns, the lines only
// a single object shows, and the id -q prints. The views are declared by
// the resource kinds that print them (ncl's kind files) and handed to the
// printer as one table (Views); a message with none prints as its JSON.

// Col is one table column (and one line of an object's block). A Wide
// column is printed only with -o wide (and in an object's block): the ids
// behind the names the table shows.
type Col struct {
	Header string
	Get    func(proto.Message, Env) string
	Wide   bool
}

// Env is what a column may use besides its message: who is who, the
// reader, and the time ages are measured to.
type Env struct {
	// Names turns ids into names (nil: ids as they are).
	Names  holdview.Names
	Viewer string
	Now    time.Time
}

// View is how one message type prints: its columns, extra lines shown only
// for a single object, and the id -q prints. For names the type.
type View struct {
	Cols   []Col
	Detail []Col
	ID     func(proto.Message) string
	msg    protoreflect.FullName
}

// For is v as the view of message type T.
func For[T proto.Message](v View) View {
	var zero T
	v.msg = zero.ProtoReflect().Descriptor().FullName()
	return v
}

// Views are the views a printer knows, by message type.
type Views map[protoreflect.FullName]View

// NewViews collects views made with For; a view of no type, or a type
// given two, is a mistake in the declarations and panics.
func NewViews(vs ...View) Views {
	out := Views{}
	for _, v := range vs {
		if v.msg == "" {
			panic("render: a view made without For")
		}
		if _, dup := out[v.msg]; dup {
			panic(fmt.Sprintf("render: two views of %s", v.msg))
		}
		out[v.msg] = v
	}
	return out
}

// of is m's view, or its JSON on one line for a message with none.
func (vs Views) of(m proto.Message) View {
	if v, ok := vs[m.ProtoReflect().Descriptor().FullName()]; ok {
		return v
	}
	return View{
		Cols: []Col{{Header: "VALUE", Get: func(m proto.Message, _ Env) string { return compactJSON(m) }}},
		ID:   func(proto.Message) string { return "" },
	}
}

// C is a column of a T's field.
func C[T proto.Message](header string, get func(T) string) Col {
	return Col{Header: header, Get: func(m proto.Message, _ Env) string { return get(m.(T)) }}
}

// CX is a column that reads names (or the reader, or the time).
func CX[T proto.Message](header string, get func(T, Env) string) Col {
	return Col{Header: header, Get: func(m proto.Message, e Env) string { return get(m.(T), e) }}
}

// Wide marks a column -o wide only.
func Wide(cl Col) Col {
	cl.Wide = true
	return cl
}

// IDOf is a view's ID from a T's field.
func IDOf[T proto.Message](get func(T) string) func(proto.Message) string {
	return func(m proto.Message) string { return get(m.(T)) }
}

// Group is a group by name (its id when the name is not known).
func (e Env) Group(id string) string { return holdview.Group(e.Names, id) }

// User is a user by display name (their id when none is known).
func (e Env) User(id string) string { return holdview.User(e.Names, id) }

// GroupName is a group's name, "" when it is not known.
func (e Env) GroupName(id string) string { return e.known().GroupName(id) }

// UserName is a user's display name, "" when it is not known.
func (e Env) UserName(id string) string { return e.known().UserName(id) }

// known is the names, or none (a nil Names answers "" for every id).
func (e Env) known() holdview.Names {
	if e.Names == nil {
		return noNames{}
	}
	return e.Names
}

type noNames struct{}

func (noNames) GroupName(string) string { return "" }
func (noNames) UserName(string) string  { return "" }

// Approvers names escalation targets: users, and "group:<id>" as "admins
// of <group>"; "nobody" for none.
func (e Env) Approvers(ids []string) string {
	var out []string
	for _, id := range ids {
		if g, ok := strings.CutPrefix(id, "group:"); ok {
			out = append(out, "admins of "+e.Group(g))
		} else {
			out = append(out, e.User(id))
		}
	}
	if len(out) == 0 {
		return "nobody"
	}
	return strings.Join(out, ", ")
}

// Escalation is a plan in a few words ("remind 10m, escalate 30m to
// Erin"), "" when there is none.
func (e Env) Escalation(remind, escalate *durationpb.Duration, to []string) string {
	var parts []string
	if remind != nil {
		parts = append(parts, "remind "+shortDuration(remind.AsDuration()))
	}
	if escalate != nil {
		parts = append(parts, "escalate "+shortDuration(escalate.AsDuration())+" to "+e.Approvers(to))
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
