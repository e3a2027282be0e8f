package guard

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// Facts are the values an entry's Facts read, by name. A NULL reads as
// absent.
type Facts struct {
	vals map[string]*string
}

// NewFacts builds facts from a map (unit tests of baselines).
func NewFacts(m map[string]string) Facts {
	f := Facts{vals: map[string]*string{}}
	for k, v := range m {
		f.vals[k] = &v
	}
	return f
}

// Has reports whether a fact is present (not NULL).
func (f Facts) Has(name string) bool { return f.vals[name] != nil }

// Str is a fact's text, "" when absent.
func (f Facts) Str(name string) string {
	if v := f.vals[name]; v != nil {
		return *v
	}
	return ""
}

// Bool is true when the fact reads as Postgres true.
func (f Facts) Bool(name string) bool { return f.Str(name) == "true" }

// common is what every decision reads besides the entry's facts.
type common struct {
	sessionRunner *string // sessions.runner_id of the actor's session
	sessionGroup  *string
	grant         *GrantRow
	prior         []byte // stored answer of an earlier request with the same id
}

// The fixed parameters: $1 actor group, $2 actor session, $3 grant id,
// $4 runner id and $5 request id (idempotency key). Entry args follow.
// A decision without a grant (or a request id) skips that join: the
// statement comes in four variants, each parameter still typed.
const commonSelect = `SELECT $1::text, s.runner_id, s.agent_group_id,`

const grantCols = `
       g.kind, g.status, g.consumed_at IS NOT NULL, g.payload::text, g.agent_group_id, g.catalog_action, g.session_id,
       g.resource::text, g.consumed_by, g.applied_at IS NOT NULL,`

const noGrantCols = `
       NULLIF($3::text, $3::text), NULL::text, NULL::bool, NULL::text, NULL::text, NULL::text, NULL::text,
       NULL::text, NULL::text, NULL::bool,`

const priorCol = `
       p.answer`

const noPriorCol = `
       CASE WHEN $4::text IS NULL AND $5::text IS NULL THEN NULL::bytea END`

const commonFrom = `
  FROM (SELECT 1) AS one
  LEFT JOIN sessions s ON s.id = $2::text`

const grantJoin = `
  LEFT JOIN holds g ON g.id = $3::text`

const priorJoin = `
  LEFT JOIN decision_requests p ON p.runner_id = $4::text AND p.request_id = $5::text`

// variant indexes a facts statement: bit 1 = has a grant, bit 0 = has a request id.
func variant(grant, requestID string) int {
	v := 0
	if grant != "" {
		v |= 2
	}
	if requestID != "" {
		v |= 1
	}
	return v
}

// factsQueries builds the four variants of an entry's facts statement.
func factsQueries(facts []Fact) [4]string {
	var out [4]string
	for v := range out {
		var b strings.Builder
		b.WriteString(commonSelect)
		if v&2 != 0 {
			b.WriteString(grantCols)
		} else {
			b.WriteString(noGrantCols)
		}
		if v&1 != 0 {
			b.WriteString(priorCol)
		} else {
			b.WriteString(noPriorCol)
		}
		for _, f := range facts {
			fmt.Fprintf(&b, ",\n       (%s)::text", f.SQL)
		}
		b.WriteString(commonFrom)
		if v&2 != 0 {
			b.WriteString(grantJoin)
		}
		if v&1 != 0 {
			b.WriteString(priorJoin)
		}
		out[v] = b.String()
	}
	return out
}

// readFacts runs an entry's facts statement: ONE round trip.
func readFacts(ctx context.Context, q Querier, query string, facts []Fact, args []any) (common, Facts, error) {
	var (
		c                    common
		actorGroup           *string
		gKind, gStatus, gPay *string
		gConsumed            *bool
		gGroup, gAction      *string
		gSession             *string
		gResource, gBy       *string
		gApplied             *bool
	)
	dest := []any{&actorGroup, &c.sessionRunner, &c.sessionGroup, &gKind, &gStatus, &gConsumed, &gPay, &gGroup, &gAction, &gSession,
		&gResource, &gBy, &gApplied, &c.prior}
	vals := make([]*string, len(facts))
	for i := range vals {
		dest = append(dest, &vals[i])
	}
	if err := q.QueryRow(ctx, query, args...).Scan(dest...); err != nil {
		return common{}, Facts{}, fmt.Errorf("read decision facts: %w", err)
	}
	f := Facts{vals: make(map[string]*string, len(facts))}
	for i, fact := range facts {
		f.vals[fact.Name] = vals[i]
	}
	if gKind != nil {
		g := &GrantRow{Kind: *gKind, Status: deref(gStatus), Consumed: gConsumed != nil && *gConsumed,
			AgentGroupID: deref(gGroup), CatalogAction: deref(gAction), SessionID: deref(gSession),
			ConsumedBy: deref(gBy), Applied: gApplied != nil && *gApplied}
		if gPay != nil {
			if err := json.Unmarshal([]byte(*gPay), &g.Payload); err != nil {
				return common{}, Facts{}, fmt.Errorf("decode grant payload: %w", err)
			}
		}
		if gResource != nil {
			if err := json.Unmarshal([]byte(*gResource), &g.Resource); err != nil {
				return common{}, Facts{}, fmt.Errorf("decode grant resource: %w", err)
			}
		}
		c.grant = g
	}
	return c, f, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
