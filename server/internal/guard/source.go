package guard

import (
	"context"
	"errors"
)

// A factSource reads what deciding a plan needs: the entry's facts and the
// actor's session row, and — live only — the hold a grant names and the
// answer stored for a repeated request id. The engine asks its sources in
// order (the replica's copy first, when it has one) and decides from the
// first that serves the plan.
type factSource interface {
	read(ctx context.Context, p *plan) (*reading, error)
}

// errNotServed: the source cannot settle the plan; the next source reads it.
var errNotServed = errors.New("not served by this fact source")

// reading is what a source read for one plan.
type reading struct {
	common
	facts Facts
	// fence is the fact revision a copy was read at (nil: read live). A
	// fenced decision's log row is written only while the database is still
	// at that revision (the log INSERT checks it), so a change committed
	// before then — a revocation the copy has not applied yet — is never
	// answered from the copy: the write reports errStale and the plan is
	// decided again, live.
	fence *int64
}

// liveSource reads from the database in one statement: through the
// batcher, batched with other decisions' work, or at once for a direct plan.
type liveSource struct {
	batched, direct Querier
	nonCatalog      *[4]string
}

func (s liveSource) read(ctx context.Context, p *plan) (*reading, error) {
	if p.badArgs {
		return &reading{}, nil // nothing to read with; judge fails it closed
	}
	q := s.batched
	if p.direct {
		q = s.direct
	}
	query, facts := p.statement(s.nonCatalog)
	c, f, err := readFacts(ctx, q, query, facts, p.args)
	if err != nil {
		return nil, err
	}
	return &reading{common: c, facts: f}, nil
}

// snapshotSource reads from the replica's copy of the mirrored tables, with
// no round trip. It serves only what the copy can settle alone: an entry
// whose facts are all lookups, no grant, no dry run, and an actor session
// the copy already places on the calling runner (one just placed there is
// confirmed live).
type snapshotSource struct {
	snap    Snapshot
	catalog *Catalog
}

func (s snapshotSource) read(_ context.Context, p *plan) (*reading, error) {
	args, ok := p.snapshotArgs()
	if !ok {
		return nil, errNotServed
	}
	tables := s.snap.Tables()
	if tables == nil {
		return nil, errNotServed // still loading
	}
	c, f, err := s.catalog.lookupFacts(tables, p.entry, &p.req.Input, p.req.RunnerID, args)
	if err != nil {
		return nil, errNotServed // the live source reads (and reports) it
	}
	if p.req.RequireOwnedSession && !ownsSession(p.req, c) {
		return nil, errNotServed
	}
	rev := tables.Revision()
	return &reading{common: c, facts: f, fence: &rev}, nil
}

// lookupFacts reads an entry's facts and the actor's session from a copy.
func (c *Catalog) lookupFacts(v *FactTables, ce *compiled, in *Input, runner string, args []string) (common, Facts, error) {
	group, _ := in.AgentGroup()
	r := lookupReader{v: v, group: group, session: in.Session(), runner: runner, args: args}
	var out common
	var err error
	if out.sessionRunner, err = r.read(&c.session[0]); err != nil {
		return common{}, Facts{}, err
	}
	if out.sessionGroup, err = r.read(&c.session[1]); err != nil {
		return common{}, Facts{}, err
	}
	f := Facts{vals: make(map[string]*string, len(ce.lookups))}
	for i := range ce.lookups {
		val, err := r.read(&ce.lookups[i])
		if err != nil {
			return common{}, Facts{}, err
		}
		f.vals[ce.Facts[i].Name] = val
	}
	return out, f, nil
}

// ownsSession: the actor is an agent on a session the calling runner hosts.
func ownsSession(req *Request, c common) bool {
	a := req.Actor.GetAgent()
	return a != nil && a.GetSessionId() != "" && c.sessionRunner != nil && *c.sessionRunner == req.RunnerID &&
		c.sessionGroup != nil && *c.sessionGroup == a.GetAgentGroupId()
}
