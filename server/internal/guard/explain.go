package guard

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/holdview"
)

// ExplainFunc describes how an entry's baseline reached d from in and f: one
// Check per structural check in the baseline's order, and what would change
// the answer. It reads exactly what the baseline read, so a logged decision
// is explained from its trace (the facts, the resource and the entry's
// TraceArgs as they were when deciding), not from today's database.
type ExplainFunc func(in *Input, f Facts, d Decision) Explained

// Explained is an entry's account of one decision.
type Explained struct {
	Summary     string // "" → "<effect> because <reason>"
	Checks      []Check
	WouldChange []string
}

// Check is one structural check in words.
type Check struct {
	Name    string
	Facts   []string // names of the facts it read
	Outcome string   // "pass", "allow", "hold", "deny" or "skipped"
	Detail  string
}

// Trace is what the decision log keeps so a decision can be explained later:
// the facts the baseline read, the resource, and the payload keys the entry
// lists in TraceArgs — never the whole payload (it may be large or private).
type Trace struct {
	Facts    map[string]*string `json:"f,omitempty"`
	Resource map[string]string  `json:"r,omitempty"`
	Args     map[string]any     `json:"a,omitempty"`
}

// encodeTrace is the decision log's trace column for a catalog decision
// (nil for non-catalog actions: there is nothing to explain but the name).
// Hand-built, like the actor column: it is on the hot write path.
func encodeTrace(e *Entry, in *Input, f Facts) []byte {
	if e == nil {
		return nil
	}
	b := make([]byte, 0, 128)
	b = append(b, `{"f":{`...)
	first := true
	for _, fact := range e.Facts {
		// A NULL fact is left out (ExplainLogged reads it back as NULL):
		// most facts of most decisions are NULL, and this column is most of
		// the decision log's WAL.
		if v := f.vals[fact.Name]; v != nil {
			b = traceKey(b, fact.Name, &first)
			b = appendJSONString(b, *v)
		}
	}
	for name, v := range f.vals { // facts every entry reads (the mode), not in e.Facts
		if v != nil && !e.hasFact(name) {
			b = traceKey(b, name, &first)
			b = appendJSONString(b, *v)
		}
	}
	b = append(b, `},"r":{`...)
	first = true
	keys := make([]string, 0, len(in.Resource))
	for k := range in.Resource {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b = traceKey(b, k, &first)
		b = appendJSONString(b, in.Resource[k])
	}
	b = append(b, '}')
	if len(e.TraceArgs) > 0 {
		args := map[string]any{}
		for _, k := range e.TraceArgs {
			if v, ok := in.Payload[k]; ok {
				args[k] = v
			}
		}
		if a, err := json.Marshal(args); err == nil && len(args) > 0 {
			b = append(b, `,"a":`...)
			b = append(b, a...)
		}
	}
	return append(b, '}')
}

func (e *Entry) hasFact(name string) bool {
	for _, f := range e.Facts {
		if f.Name == name {
			return true
		}
	}
	return false
}

func traceKey(b []byte, k string, first *bool) []byte {
	if !*first {
		b = append(b, ',')
	}
	*first = false
	b = appendJSONString(b, k)
	return append(b, ':')
}

// appendJSONString quotes s as JSON (plain ASCII fast; anything else
// through encoding/json).
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// Logged is a decision log row as Explain needs it.
type Logged struct {
	Action    string
	Actor     *guardv1.Actor
	Effect    Effect
	Reason    string
	DecidedBy string
	Grant     string
	Trace     []byte // the trace column; nil for rows logged before traces existed
}

// ExplainLogged explains a logged decision from its trace.
func (c *Catalog) ExplainLogged(l Logged) *guardv1.Explanation {
	e, _ := c.Lookup(l.Action)
	in := &Input{Action: l.Action, Actor: l.Actor, Grant: l.Grant}
	f := Facts{vals: map[string]*string{}}
	traced := len(l.Trace) > 0
	if traced {
		var t Trace
		if err := json.Unmarshal(l.Trace, &t); err != nil {
			traced = false
		} else {
			in.Resource, in.Payload = t.Resource, t.Args
			if t.Facts != nil {
				f.vals = t.Facts
			}
			if e != nil {
				for _, fact := range e.Facts {
					if _, ok := f.vals[fact.Name]; !ok {
						f.vals[fact.Name] = nil // left out of the trace: NULL
					}
				}
			}
		}
	}
	d := Decision{Effect: l.Effect, Reason: l.Reason, DecidedBy: l.DecidedBy}
	x := Explain(e, in, f, d)
	if e != nil && !traced && (l.DecidedBy == ByBaseline || l.DecidedBy == ByGrant) {
		x.Checks = nil
		x.WouldChange = nil
		x.Summary += " (this decision was logged without its facts, so its checks cannot be shown)"
	}
	return x
}

// Explain builds the one explanation of decision d about in, from the facts
// f read when deciding (e == nil: a non-catalog action). The console,
// `ncl explain` and `ncl decisions get` all show what this returns.
func Explain(e *Entry, in *Input, f Facts, d Decision) *guardv1.Explanation {
	x := &guardv1.Explanation{Entry: &guardv1.ExplainedEntry{Action: in.Action}}
	if e == nil {
		x.Summary = fmt.Sprintf("allowed because %s is not in the catalog (non-catalog actions, such as reads, are allowed)", in.Action)
		x.WouldChange = []string{"a catalog entry for " + in.Action + " would put it behind a baseline"}
		return x
	}
	x.Entry.InCatalog, x.Entry.Description, x.Entry.ApprovalAction = true, e.Description, e.ApprovalAction
	x.Summary = fmt.Sprintf("%s because %s", effectWord(d.Effect), d.Reason)
	if explainedAlone(x, d) {
		return x
	}
	standing := d.DecidedBy == ByStanding
	unheld := d.DecidedBy == ByNoApprover
	if d.Would == nil && d.DecidedBy != ByGrant && !standing && !unheld {
		// A logged decision keeps only its answer: the baseline is pure, so
		// re-run it over the same facts to see whether a mode relaxed it.
		if ev := evaluate(e, in, f); ev.Would != nil && ev.Effect == d.Effect {
			d.Would, d.Mode = ev.Would, ev.Mode
		}
	}
	base := d
	if d.Would != nil {
		// A mode relaxed the gate: explain what the gate itself found.
		base = *d.Would
	}
	if d.DecidedBy == ByGrant || standing || unheld {
		// The grant was checked (or the hold could not be made) because the
		// baseline held; re-run it (pure) over the same facts to show why.
		base = evaluate(e, in, f)
	}
	var ex Explained
	if e.Explain != nil {
		ex = safeExplain(e, in, f, base)
	} else {
		ex = genericExplain(f, base)
	}
	for _, c := range ex.Checks {
		ec := &guardv1.ExplainedCheck{Name: c.Name, Outcome: c.Outcome, Detail: c.Detail}
		for _, name := range c.Facts {
			ec.Facts = append(ec.Facts, &guardv1.ExplainedFact{Name: name, Value: f.Str(name), Present: f.Has(name)})
		}
		x.Checks = append(x.Checks, ec)
	}
	x.WouldChange = ex.WouldChange
	if ex.Summary != "" && d.DecidedBy != ByGrant && !standing && !unheld {
		x.Summary = ex.Summary
	}
	explainGrantUse(x, e, in, d, base)
	if d.Would != nil {
		explainMode(x, d)
	}
	return x
}

// explainedAlone explains a decision no baseline made — the guard failed
// closed, a freeze or a precheck denied — and says whether it did.
func explainedAlone(x *guardv1.Explanation, d Decision) bool {
	switch d.DecidedBy {
	case ByGuardFailure:
		x.Checks = []*guardv1.ExplainedCheck{{Name: "guard", Outcome: "deny",
			Detail: "the facts could not be read, or the baseline errored or panicked: the guard fails closed"}}
		x.WouldChange = []string{"the same request once the database answers and the baseline runs → the baseline's answer"}
		return true
	case ByFreeze:
		x.Checks = []*guardv1.ExplainedCheck{{Name: "freeze", Outcome: "deny",
			Detail: d.Reason + "; always enforced: no mode, grant or approval passes it"}}
		x.WouldChange = []string{"ncl unfreeze of the scope → the checks decide again"}
		return true
	case ByPrecheck:
		x.Checks = []*guardv1.ExplainedCheck{{Name: "precheck", Outcome: "deny",
			Detail: "the request is malformed: " + d.Reason + " (no hold is ever created for it)"}}
		x.WouldChange = []string{"a well-formed request → the baseline decides"}
		return true
	}
	return false
}

// explainGrantUse adds what a grant, a standing grant or a hold that could
// not be made did to the answer (base: what the baseline itself answered).
func explainGrantUse(x *guardv1.Explanation, e *Entry, in *Input, d, base Decision) {
	standing := d.DecidedBy == ByStanding
	unheld := d.DecidedBy == ByNoApprover
	if d.DecidedBy == ByGrant {
		ok := d.Effect == EffectAllow
		x.Grant = in.Grant
		detail := fmt.Sprintf("approval %s is an approved, unconsumed %s hold for this request; this replay consumed it", in.Grant, e.ApprovalAction)
		if !ok {
			detail = fmt.Sprintf("approval %s is not an approved, unconsumed %s hold bound to this exact request (or another replay consumed it first)", in.Grant, e.ApprovalAction)
		}
		x.Checks = append(x.Checks, &guardv1.ExplainedCheck{Name: "grant", Outcome: string(d.Effect), Detail: detail})
		x.WouldChange = []string{"without the grant → hold again (" + base.Reason + ")"}
		if !ok {
			x.WouldChange = append(x.WouldChange, "a grant from an approved hold of this exact request → allow")
		}
	} else if standing {
		x.Checks = append(x.Checks, &guardv1.ExplainedCheck{Name: "standing grant", Outcome: string(d.Effect),
			Detail: d.Reason + ": it approved exactly this request (action, group, target and payload), is live, and its approvers may still approve it"})
		x.WouldChange = []string{"revoking it (ncl grants revoke), its expiry or its approver's role revoked → hold again (" + base.Reason + ")"}
	} else if unheld {
		explainUnheld(x, d, base)
	} else if in.Grant != "" {
		x.Grant = in.Grant
		x.Checks = append(x.Checks, &guardv1.ExplainedCheck{Name: "grant", Outcome: "skipped",
			Detail: fmt.Sprintf("approval %s was not used: a grant only satisfies a hold, and the baseline did not hold", in.Grant)})
	}
}

// explainMode says that a gate in audit or warn mode let the action run, and
// what enforce would have answered.
func explainMode(x *guardv1.Explanation, d Decision) {
	told := "the decision log records it"
	if d.Mode == ModeWarn {
		told = "the agent and its group's admins are told"
	}
	x.Summary = fmt.Sprintf("%s because the gate is in %s mode — enforce would %s: %s", effectWord(d.Effect), d.Mode, verb(d.Would.Effect), d.Would.Reason)
	x.Checks = append(x.Checks, &guardv1.ExplainedCheck{Name: "mode", Outcome: string(d.Effect),
		Detail: fmt.Sprintf("%s mode: the action is not stopped here; %s", d.Mode, told)})
	x.WouldChange = append(x.WouldChange, fmt.Sprintf("the gate in enforce mode (ncl catalog set / ncl policies set --mode enforce) → %s", d.Would.Effect))
}

func safeExplain(e *Entry, in *Input, f Facts, d Decision) (ex Explained) {
	defer func() {
		if r := recover(); r != nil {
			ex = genericExplain(f, d)
		}
	}()
	return e.Explain(in, f, d)
}

// genericExplain is the account of an entry without its own Explain: the
// facts it read and the baseline's answer.
func genericExplain(f Facts, d Decision) Explained {
	names := make([]string, 0, len(f.vals))
	for k, v := range f.vals {
		if v == nil && isFreezeFact(k) {
			continue // a scope not frozen says nothing about this decision
		}
		names = append(names, k)
	}
	sort.Strings(names)
	return Explained{Checks: []Check{{Name: "baseline", Facts: names, Outcome: string(d.Effect), Detail: d.Reason}}}
}

func effectWord(e Effect) string {
	switch e {
	case EffectAllow:
		return "allowed"
	case EffectHold:
		return "held"
	}
	return "denied"
}

// RuleInWords says who may resolve a hold with this rule and scope, by id
// (holdview.RuleWords, which the console's hold page names).
func RuleInWords(rule *guardv1.ApproverRule, scope guardv1.ApproverScope) string {
	return holdview.RuleWords(rule, scope, nil, nil)
}

// ActorInWords names an actor ("agent of group g (session s)", "host", ...).
func ActorInWords(a *guardv1.Actor) string {
	switch k := a.GetKind().(type) {
	case *guardv1.Actor_Host:
		return "the operator (host)"
	case *guardv1.Actor_Agent:
		s := "an agent of group " + k.Agent.GetAgentGroupId()
		if k.Agent.GetSessionId() != "" {
			s += " (session " + k.Agent.GetSessionId() + ")"
		}
		return s
	case *guardv1.Actor_Human:
		return "user " + k.Human.GetUserId()
	case *guardv1.Actor_System:
		return "the system"
	}
	return "nobody"
}

// explainUnheld adds to x why a held gate's hold was not made (an Unheld
// DENY): the approvers check and the fix its reason names.
func explainUnheld(x *guardv1.Explanation, d, gate Decision) {
	_, why, _ := strings.Cut(d.Reason, NoHoldMade)
	x.Checks = append(x.Checks, &guardv1.ExplainedCheck{Name: "approvers", Outcome: "deny",
		Detail: "the gate held, but no hold was made (so nothing is pending): " + why})
	fix := "enough users eligible to approve it"
	if i := strings.LastIndex(why, "(fix: "); i >= 0 {
		fix = strings.TrimSuffix(why[i+len("(fix: "):], ")")
	}
	x.WouldChange = []string{fix + " → hold for approval (" + gate.Reason + ")"}
}
