package guard

import (
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Request is one decision to make.
type Request struct {
	Input
	// RawPayload is Input.Payload as received (stored with a hold); nil →
	// built from Input.Payload when needed.
	RawPayload *structpb.Struct
	// Card: a HOLD answer creates its hold in the same transaction.
	Card *guardv1.HoldCard
	// DryRun evaluates with no side effects (no hold, no grant consumed).
	DryRun bool
	// RequestID with RunnerID is the idempotency key.
	RequestID string
	// RunnerID is the calling runner ("" for other principals).
	RunnerID string
	// RequireOwnedSession: the actor must be an agent on a session RunnerID hosts.
	RequireOwnedSession bool
}

// plan is a request made ready to decide: its catalog entry looked up and
// its statement's parameters built, once, for every step after.
type plan struct {
	req   *Request
	entry *compiled // nil: the action is not in the catalog
	// args are the facts statement's parameters (the convention of
	// catalog.go): the actor's group, its session, the grant, the runner,
	// the request id, then the entry's Args.
	args []any
	// badArgs: the entry's Args panicked. Nothing is read and the decision
	// fails closed.
	badArgs bool
	// direct: read the facts at once on a pooled connection, not behind a
	// batch — a replay and a likely hold are each a transaction of their own.
	direct bool
	start  time.Time
}

func (e *Engine) plan(req *Request) *plan {
	p := &plan{req: req, start: time.Now(), direct: req.Grant != ""}
	p.entry, _ = e.Catalog.lookup(req.Action)
	group, _ := req.AgentGroup()
	p.args = []any{group, req.Session(), req.Grant, req.RunnerID, req.RequestID}
	if p.entry != nil {
		extra, ok := p.entry.argsOf(&req.Input)
		p.args, p.badArgs = append(p.args, extra...), !ok
	}
	return p
}

// Entry is the plan's catalog entry (nil outside the catalog).
func (p *plan) Entry() *Entry {
	if p.entry == nil {
		return nil
	}
	return p.entry.Entry
}

// retryable: a failure to decide p is ErrUnavailable rather than a
// fail-closed DENY — only a replay, whose grant would be consumed.
func (p *plan) retryable() bool { return p.req.Grant != "" && !p.req.DryRun }

// statement is p's facts statement and the facts it reads (nonCatalog: the
// statement of an action outside the catalog, which reads no facts).
func (p *plan) statement(nonCatalog *[4]string) (string, []Fact) {
	v := variant(p.req.Grant, p.req.RequestID)
	if p.entry == nil {
		return nonCatalog[v], nil
	}
	return p.entry.queries[v], p.entry.Facts
}

// snapshotArgs are the entry's Args as the strings a snapshot's lookups
// compare keys with; ok false when the copy cannot settle p (a grant to
// consume, a dry run, an entry with SQL facts, or an argument that is not
// a string).
func (p *plan) snapshotArgs() (out []string, ok bool) {
	if p.entry == nil || !p.entry.fromSnapshot || p.req.Grant != "" || p.req.DryRun || p.badArgs {
		return nil, false
	}
	extra := p.args[5:]
	out = make([]string, len(extra))
	for i, a := range extra {
		if out[i], ok = a.(string); !ok {
			return nil, false
		}
	}
	return out, true
}

// kind says whether p changes nothing, and so is counted apart from
// enforced decisions: "dry_run" (ncl explain), "read" (an admin RPC of open
// access that only lists or gets), "" otherwise.
func (p *plan) kind() string {
	if p.req.DryRun {
		return "dry_run"
	}
	if e := p.entry; e != nil && e.Resource != "" && e.Access == guardv1.Access_ACCESS_OPEN && isRead(p.req.Action) {
		return "read"
	}
	return ""
}

// metricAction bounds the action label: "non_catalog" outside the catalog.
func (p *plan) metricAction() string {
	if p.entry == nil {
		return "non_catalog"
	}
	return p.req.Action
}
