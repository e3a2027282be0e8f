package guard

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"sync"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Fact is one value a baseline needs from the database, read in the
// decision's single round trip: a scalar SQL expression (usually a scalar
// subquery) whose result is read as text (NULL → absent).
//
// The parameter convention, shared by every entry because all facts of a
// decision are columns of one statement (facts.go builds it):
//
//	$1  the actor's agent group ("" when not an agent)   — a fact may use it
//	$2  the actor's session                              — a fact may use it
//	$3  the grant (hold id)                              — the engine's own join
//	$4  the runner id, $5 the request id                 — the engine's idempotency join
//	$6, $7, ...  the entry's Args(in), in order          — the entry's own values
//
// So a fact reads the actor through $1/$2 and its own inputs from $6 on,
// never $3..$5. Parameters must be cast ($6::text) so Postgres can type them.
type Fact struct {
	Name string
	SQL  string
	// Lookup, set by Lookup.Fact (which derives SQL from it), lets the
	// replica's snapshot answer the fact without reading the database.
	Lookup *Lookup
}

// Entry is one catalog entry (the seed's GuardedActionSpec).
type Entry struct {
	// Action is the dotted catalog name, the key.
	Action string
	// ApprovalAction is the hold kind its grants must carry; "" = the
	// entry can never be satisfied by a grant.
	ApprovalAction string
	// Description is shown by `ncl catalog list`.
	Description string
	// Access and Resource are set for admin-RPC entries.
	Access   guardv1.Access
	Resource string

	// Facts are read in the decision's one round trip; Args supplies their
	// extra parameters ($6 onwards) from the input.
	Facts []Fact
	Args  func(in *Input) []any
	// Names are the objects the request names that the facts read beyond
	// the actor's own group (through Args): a caller that may read only
	// some objects (a user's dry run) is answered only when it may read
	// every one, and one it may not reads as not found. An entry with Args
	// declares them (nil Names there is refused to such callers); an empty
	// answer says the facts read nothing the actor's group cannot.
	Names func(in *Input) []Ref
	// Precheck refuses malformed requests before the baseline runs: the
	// error text is the deny reason and no hold is ever created.
	Precheck func(in *Input, f Facts) error
	// Baseline is the structural check: the only source of allow. It runs
	// on every consult, replays included (a grant satisfies a hold, never a deny).
	Baseline func(in *Input, f Facts) (Decision, error)
	// GrantMatches binds a grant to the replayed input (e.g. the a2a target
	// must equal the held target). Runs in addition to the kind and
	// liveness checks. Nil = any grant of the right kind and group.
	GrantMatches func(g *GrantRow, in *Input) bool
	// Explain says in words how Baseline decided (optional; without it the
	// explanation lists the facts read and the answer). TraceArgs are the
	// payload keys it and Baseline read: the decision log keeps only those.
	Explain   ExplainFunc
	TraceArgs []string
	// NextRequestUses marks an entry whose held request is not replayed
	// (an outbound connection): its approval is used, once, by the next
	// identical request of the session that asked (ApprovedFinder).
	NextRequestUses bool
}

// Ref is an object a request names.
type Ref struct {
	Kind RefKind
	ID   string
}

// RefKind is what kind of object a Ref names.
type RefKind int

// The kinds of object a request names.
const (
	RefAgentGroup RefKind = iota + 1
	RefChat               // a messaging group
)

var actionRe = regexp.MustCompile(`^[a-z0-9_-]+(\.[a-z0-9_-]+)+$`)

// Catalog is the set of guarded actions. Declaration is registration:
// entries are added by the domains at their edges (and, for admin RPCs,
// derived from the RPC rule options); a duplicate action is an error.
type Catalog struct {
	mu      sync.RWMutex
	entries map[string]*compiled
	tables  tableSet
	// session are the engine's own lookups of the actor's session: its
	// runner and its group.
	session [2]compiledLookup
}

type compiled struct {
	*Entry
	queries [4]string // the facts statement's variants, built once (see variant)
	// lookups are the facts as snapshot lookups, in Facts order, when every
	// fact is one (fromSnapshot): the decision can then be made from the
	// replica's copy.
	lookups      []compiledLookup
	fromSnapshot bool
}

// The engine's lookups of the actor's session (the live path joins the
// same row: commonFrom).
var sessionLookups = [2]Lookup{
	{Table: "sessions", Key: []KeyEq{{"id", ActorSession}}, Column: "runner_id"},
	{Table: "sessions", Key: []KeyEq{{"id", ActorSession}}, Column: "agent_group_id"},
}

// argsOf is the entry's Args(in), its facts' parameters from $6 on; ok
// false when Args panics.
func (ce *compiled) argsOf(in *Input) (args []any, ok bool) {
	if ce.Args == nil {
		return nil, true
	}
	defer func() {
		if recover() != nil {
			args, ok = nil, false
		}
	}()
	return ce.Args(in), true
}

// NewCatalog returns an empty catalog.
func NewCatalog() *Catalog {
	c := &Catalog{entries: map[string]*compiled{}}
	for i, l := range sessionLookups {
		t, v, err := c.tables.add(l)
		if err != nil {
			panic(err) // a constant above
		}
		c.session[i] = compiledLookup{Lookup: l, table: t, value: v}
	}
	return c
}

// Register adds an entry; a duplicate or malformed entry is an error.
func (c *Catalog) Register(e Entry) error {
	if !actionRe.MatchString(e.Action) {
		return fmt.Errorf("guard catalog: action %q is not a dotted lower-case name", e.Action)
	}
	if e.Baseline == nil {
		return fmt.Errorf("guard catalog: %s has no baseline", e.Action)
	}
	seen := map[string]bool{}
	for _, f := range e.Facts {
		if f.Name == "" || f.SQL == "" || seen[f.Name] || f.Name == modeFact || isFreezeFact(f.Name) {
			return fmt.Errorf("guard catalog: %s has an empty or repeated fact %q", e.Action, f.Name)
		}
		if f.Lookup != nil {
			if err := f.Lookup.check(); err != nil {
				return fmt.Errorf("guard catalog: %s fact %s: %w", e.Action, f.Name, err)
			}
			if f.SQL != f.Lookup.sql() {
				return fmt.Errorf("guard catalog: %s fact %s: SQL is not its lookup's (use Lookup.Fact)", e.Action, f.Name)
			}
		}
		seen[f.Name] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, dup := c.entries[e.Action]; dup {
		return fmt.Errorf("guard catalog: action %s registered twice", e.Action)
	}
	entry := e
	// Every entry also reads its action's enforcement mode (the action name
	// is a checked dotted identifier, safe as a literal).
	mode := Lookup{Table: "action_settings", Key: []KeyEq{{"action", Literal(e.Action)}}, Column: "mode"}
	facts := append(slices.Clone(entry.Facts), mode.Fact(modeFact))
	// And whether the agent's scope is frozen (freeze.go).
	facts = append(facts, freezeFacts()...)
	entry.Facts = facts
	ce := &compiled{Entry: &entry, queries: factsQueries(facts), fromSnapshot: true}
	tables := c.tables.clone()
	for _, f := range facts {
		if f.Lookup == nil {
			ce.fromSnapshot, ce.lookups = false, nil
			break
		}
		t, v, err := tables.add(*f.Lookup)
		if err != nil {
			return fmt.Errorf("guard catalog: %s fact %s: %w", e.Action, f.Name, err)
		}
		ce.lookups = append(ce.lookups, compiledLookup{Lookup: *f.Lookup, table: t, value: v})
	}
	if ce.fromSnapshot {
		c.tables = tables // only an entry the snapshot serves adds what it reads
	}
	c.entries[e.Action] = ce
	return nil
}

// MustRegister registers entries and panics on error (package init of tests).
func (c *Catalog) MustRegister(es ...Entry) {
	for _, e := range es {
		if err := c.Register(e); err != nil {
			panic(err)
		}
	}
}

// Lookup returns the entry for an action.
func (c *Catalog) Lookup(action string) (*Entry, bool) {
	ce, ok := c.lookup(action)
	if !ok {
		return nil, false
	}
	return ce.Entry, true
}

func (c *Catalog) lookup(action string) (*compiled, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ce, ok := c.entries[action]
	return ce, ok
}

// List returns every entry, sorted by action.
func (c *Catalog) List() []*Entry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*Entry, 0, len(c.entries))
	for _, ce := range c.entries {
		out = append(out, ce.Entry)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Action < out[j].Action })
	return out
}

// ApprovalKinds lists the hold kinds grants must carry — every entry's
// approval action — sorted and deduplicated: the kinds of the holds only a
// decision creates. Security lists (kinds a bridge may not request, metric
// label sets) are derived from it, so a new entry updates them.
func (c *Catalog) ApprovalKinds() []string {
	seen := map[string]bool{}
	var out []string
	for _, e := range c.List() {
		if k := e.ApprovalAction; k != "" && !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// IsApprovalKind reports whether kind is some entry's approval action.
func (c *Catalog) IsApprovalKind(kind string) bool {
	for _, e := range c.List() {
		if e.ApprovalAction == kind {
			return true
		}
	}
	return false
}

// Actions lists the action names, sorted.
func (c *Catalog) Actions() []string {
	es := c.List()
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Action
	}
	return out
}
