package console

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/holdcard"
	"github.com/clawguard/clawguard/proto/holdview"
	"github.com/clawguard/clawguard/server/internal/api"
	"github.com/clawguard/clawguard/server/internal/fault"
	"github.com/clawguard/clawguard/server/internal/guard"
)

// view is what every page template gets.
type view struct {
	Title string
	User  string // "" when signed out
	CSRF  string
	Nav   string // the active menu entry
	Data  any
	// Names turns the page's ids into names (nil: ids as they are).
	Names holdview.Names
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, code int, page string, s *session, title string, data any) {
	c.renderNav(w, r, code, page, page, s, title, data)
}

func (c *Console) renderNav(w http.ResponseWriter, r *http.Request, code int, page, nav string, s *session, title string, data any) {
	v := view{Title: title, Nav: nav, Data: data, Names: namesOf(r).book()}
	if s != nil {
		v.User, v.CSRF = s.UserID, s.CSRF
	}
	name := "layout"
	if r.URL.Query().Has("fragment") && c.pages[page].Lookup("fragment") != nil {
		// A live update asks for the page's changing part only.
		name = "fragment"
	}
	var buf bytes.Buffer
	if err := c.pages[page].ExecuteTemplate(&buf, name, v); err != nil {
		c.d.Log.Error("render console page", "page", page, "err", err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// fail renders an error page with an HTTP status that means the same.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, s *session, code int, msg string) {
	c.render(w, r, code, "error", s, http.StatusText(code), msg)
}

// failRPC maps a backend error to its page: the gRPC code decides the HTTP
// status (NotFound 404, PermissionDenied 403, InvalidArgument 400, ...).
func (c *Console) failRPC(w http.ResponseWriter, r *http.Request, s *session, err error) {
	st := status.Convert(api.Status(err))
	if st.Code() == codes.PermissionDenied || (st.Code() == codes.NotFound && r.Method == http.MethodPost) {
		c.refused(r, s, st.Message())
	}
	code := map[codes.Code]int{
		codes.NotFound: http.StatusNotFound, codes.PermissionDenied: http.StatusForbidden,
		codes.InvalidArgument: http.StatusBadRequest, codes.FailedPrecondition: http.StatusConflict,
		codes.Unauthenticated: http.StatusUnauthorized, codes.AlreadyExists: http.StatusConflict,
		codes.OutOfRange: http.StatusBadRequest, codes.DeadlineExceeded: http.StatusGatewayTimeout,
	}[st.Code()]
	if code == 0 {
		code = http.StatusServiceUnavailable
	}
	// The server's words, its ids named for this reader.
	c.fail(w, r, s, code, holdview.Words(namesOf(r).book(), st.Message()))
}

// call runs a unary RPC as the session's user and types the answer.
func call[T proto.Message](c *Console, r *http.Request, s *session, method string, req proto.Message) (T, error) {
	return backendCall[T](r.Context(), c, s, method, req)
}

// clickRetryFor bounds how long a click is asked again while the server
// cannot take it: within a browser's patience for one form post.
const clickRetryFor = 20 * time.Second

// backendCall is call on a context of the caller's choosing.
func backendCall[T proto.Message](ctx context.Context, c *Console, s *session, method string, req proto.Message) (T, error) {
	var zero T
	m, err := c.d.Backend.Call(ctx, s.caller(), method, req)
	if err != nil {
		return zero, err
	}
	t, ok := m.(T)
	if !ok {
		return zero, fault.New(fault.Internal, "%s answered %T", method, m)
	}
	return t, nil
}

// callAll calls a paged List RPC page after page (1,000 rows a page) and
// returns every page's rows in one answer: the console's tables and pickers
// show everything the user may read, not the first page.
func callAll[T proto.Message](c *Console, r *http.Request, s *session, method string, req proto.Message) (T, error) {
	var zero T
	rf := req.ProtoReflect()
	rf.Set(rf.Descriptor().Fields().ByName("limit"), protoreflect.ValueOfInt32(1000))
	var all T
	for first := true; ; first = false {
		page, err := call[T](c, r, s, method, req)
		if err != nil {
			return zero, err
		}
		pr := page.ProtoReflect()
		nextF := pr.Descriptor().Fields().ByName("next_page_token")
		next := pr.Get(nextF).String()
		pr.Clear(nextF)
		if first {
			all = page
		} else {
			proto.Merge(all, page)
		}
		if next == "" {
			return all, nil
		}
		rf.Set(rf.Descriptor().Fields().ByName("page_token"), protoreflect.ValueOfString(next))
	}
}

var funcs = template.FuncMap{
	"ago":      func(t *timestamppb.Timestamp) string { return since(t, time.Now()) },
	"until":    func(t *timestamppb.Timestamp) string { return until(t, time.Now()) },
	"when":     func(t *timestamppb.Timestamp) string { return when(t) },
	"actor":    actorInWords,
	"actorID":  actorID,
	"actorRef": actorRef,
	"rule": func(n holdview.Names, c holdcard.Card) string {
		return c.Deciders(func(id string) string { return userLabel(n, id) }, func(id string) string { return holdview.Group(n, id) })
	},
	"ruleWords": ruleInWords,
	"gref":      func(n holdview.Names, id string) template.HTML { return ref(n0(n).GroupName(id), id) },
	"grefLine":  func(n holdview.Names, id string) template.HTML { return refLine(n0(n).GroupName(id), id) },
	"uref":      func(n holdview.Names, id string) template.HTML { return ref(n0(n).UserName(id), id) },
	"ulabel":    userLabel,
	"summary":   holdview.Summary,
	"requester": holdview.Requester,
	"progress":  holdview.Progress,
	"rows":      func(n holdview.Names, items any) rowsOf { return rowsOf{N: n, Items: items} },
	"resource":  resourceWords,
	"effect":    func(e guardv1.Effect) string { return enumword.String(e) },
	"status":    func(s guardv1.HoldStatus) string { return enumword.String(s) },
	"outcome":   func(o guardv1.Outcome) string { return enumword.String(o) },
	"payload":   payloadJSON,
	"cutparts":  cutParts,
	"scope":     func(s guardv1.RoleScope) string { return enumword.String(s) },
	"role":      func(r guardv1.Role) string { return enumword.String(r) },
	"join":      strings.Join,
	"kv":        kv,
	// words: the server's text about a decision, its ids named for this
	// reader (holdview.Words); never used on what an agent or person wrote.
	"words": func(n holdview.Names, s string) string { return holdview.Words(n, s) },
	"fact": func(n holdview.Names, f *guardv1.ExplainedFact) string {
		return holdview.Fact(n, f.GetName(), f.GetValue(), f.GetPresent())
	},
	"explained": func(n holdview.Names, x *guardv1.Explanation) explainedOf { return explainedOf{N: n, X: x} },
	"past":      effectPast,
}

// explainedOf hands the explanation partial its explanation and the
// page's names.
type explainedOf struct {
	N holdview.Names
	X *guardv1.Explanation
}

// effectPast is an effect as the verb of "Why a2a.send was …".
func effectPast(e guardv1.Effect) string {
	switch e {
	case guardv1.Effect_EFFECT_ALLOW:
		return "allowed"
	case guardv1.Effect_EFFECT_HOLD:
		return "held"
	case guardv1.Effect_EFFECT_DENY:
		return "denied"
	}
	return enumword.String(e)
}

func since(t *timestamppb.Timestamp, now time.Time) string {
	if t == nil {
		return "-"
	}
	return roughly(now.Sub(t.AsTime())) + " ago"
}

func until(t *timestamppb.Timestamp, now time.Time) string {
	if t == nil {
		return "never"
	}
	d := t.AsTime().Sub(now)
	if d <= 0 {
		return "expired " + roughly(-d) + " ago"
	}
	return "in " + roughly(d)
}

func when(t *timestamppb.Timestamp) string {
	if t == nil {
		return "-"
	}
	return t.AsTime().UTC().Format("2006-01-02 15:04:05Z")
}

func roughly(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// rowsOf hands a partial its rows and the page's names.
type rowsOf struct {
	N     holdview.Names
	Items any
}

// n0 is n, or a book that knows no name.
func n0(n holdview.Names) holdview.Names {
	if n == nil {
		return noNames{}
	}
	return n
}

type noNames struct{}

func (noNames) GroupName(string) string { return "" }
func (noNames) UserName(string) string  { return "" }

// groupLabel is "research (ag_…)", or the id alone.
func groupLabel(n holdview.Names, id string) string {
	if name := holdview.Group(n, id); name != id {
		return name + " (" + id + ")"
	}
	return id
}

// ruleInWords is who may resolve a hold with this rule and scope
// (holdview.RuleWords), its users and group by name.
func ruleInWords(n holdview.Names, rule *guardv1.ApproverRule, scope guardv1.ApproverScope) string {
	return holdview.RuleWords(rule, scope, func(id string) string { return userLabel(n, id) }, func(id string) string { return holdview.Group(n, id) })
}

// actorInWords is the guard's words for an actor, its group by name.
func actorInWords(n holdview.Names, a *guardv1.Actor) string {
	x := proto.Clone(a).(*guardv1.Actor)
	if ag := x.GetAgent(); ag != nil {
		ag.AgentGroupId = groupLabel(n, ag.GetAgentGroupId())
	}
	if h := x.GetHuman(); h != nil {
		h.UserId = userLabel(n, h.GetUserId())
	}
	return guard.ActorInWords(x)
}

// actorRef is an actor as ncl takes it, the group by name
// (agent:research:s1), with the id form as its title.
func actorRef(n holdview.Names, a *guardv1.Actor) template.HTML {
	id := actorID(a)
	label := id
	if hu := a.GetHuman(); hu != nil {
		label = holdview.User(n, hu.GetUserId()) // a person by their name
	}
	if ag := a.GetAgent(); ag != nil {
		label = "agent:" + holdview.Group(n, ag.GetAgentGroupId())
		if ag.GetSessionId() != "" {
			label += ":" + ag.GetSessionId()
		}
	}
	if label == id {
		return template.HTML(template.HTMLEscapeString(id))
	}
	return template.HTML(`<span class="ref" title="` + template.HTMLEscapeString(id) + `">` + template.HTMLEscapeString(label) + `</span>`)
}

// resourceWords is a decided resource as key=value pairs, a value that
// names a group followed by the group's name: "to=ag_… (ops)".
func resourceWords(n holdview.Names, action string, m map[string]string) string {
	parts := make([]string, 0, len(m))
	for k, v := range m {
		p := k + "=" + v
		for _, gk := range holdview.GroupResourceKeys[action] {
			if gk == k {
				if name := holdview.Group(n, v); name != v {
					p += " (" + name + ")"
				}
			}
		}
		parts = append(parts, p)
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// actorID is the compact actor form ncl prints (agent:<group>[:<session>]).
func actorID(a *guardv1.Actor) string {
	switch k := a.GetKind().(type) {
	case *guardv1.Actor_Host:
		return "host"
	case *guardv1.Actor_Agent:
		if k.Agent.GetSessionId() != "" {
			return "agent:" + k.Agent.GetAgentGroupId() + ":" + k.Agent.GetSessionId()
		}
		return "agent:" + k.Agent.GetAgentGroupId()
	case *guardv1.Actor_Human:
		return "human:" + k.Human.GetUserId()
	case *guardv1.Actor_System:
		return "system"
	}
	return "-"
}

func kv(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// maxPayloadShown bounds the payload block; anything past it is marked as cut.
const maxPayloadShown = 64 << 10

// shown is text with the part that was cut marked.
type shown struct {
	Text string
	Cut  string // "" when nothing was cut
}

// payloadJSON is the exact payload that will run (the card's), marked
// where the page cuts it.
func payloadJSON(c holdcard.Card) shown {
	s := c.Payload()
	if len(s) > maxPayloadShown {
		return shown{Text: s[:maxPayloadShown], Cut: fmt.Sprintf("%d more bytes not shown here (ncl approvals get -o json prints them all)", len(s)-maxPayloadShown)}
	}
	return shown{Text: s}
}

// cutParts splits a card's text where the server cut it ("… [N more bytes
// not shown ...]"), so the page marks the cut instead of hiding it.
func cutParts(s string) shown {
	if i := strings.Index(s, "… ["); i >= 0 && strings.Contains(s[i:], "not shown") {
		return shown{Text: s[:i] + "…", Cut: strings.TrimSuffix(strings.TrimPrefix(s[i:], "… ["), "]")}
	}
	return shown{Text: s}
}

// refused logs a refusal at info (who, what, why), like the gRPC audit log.
func (c *Console) refused(r *http.Request, s *session, why string) {
	user := ""
	if s != nil {
		user = s.UserID
	}
	c.d.Log.Info("console refused", "user", user, "method", r.Method, "path", r.URL.Path, "why", why)
}
