// Package placement decides which runners may host a group's sessions. The
// server places sessions; runners do not choose: a runner's identity (host
// and labels) is what the operator put on its token, narrowed by what it
// declares at registration, and a group's pin selects runners by that
// identity. Every other check ("does this runner host that session?") reads
// sessions.runner_id, so the invariant is that a session is only ever placed
// on a runner its group's pin matches: package sessions, which places and
// moves them, selects runners by RunnerMatchesSQL alone. This package is the
// rule, with no SQL of its own to run.
package placement

import (
	"fmt"
	"maps"
	"sort"
	"strings"

	"github.com/clawguard/clawguard/server/internal/fault"
)

// Identity is what groups are placed by: a runner's host and labels.
type Identity struct {
	Host   string
	Labels map[string]string
}

// Narrow is the identity a runner registers with: its token's, narrowed by
// what it declares (an empty declaration keeps the token's). A declared host
// or label the token does not carry is PermissionDenied. An unbound token
// (no host, no labels: minted before bindings existed, or on purpose) has no
// identity to narrow: what its runner declares is ignored (ignored = true),
// so it is placed only the sessions of unpinned groups.
func Narrow(token, declared Identity) (id Identity, ignored bool, err error) {
	if token.Host == "" && len(token.Labels) == 0 {
		return Identity{Labels: map[string]string{}}, declared.Host != "" || len(declared.Labels) > 0, nil
	}
	if declared.Host != "" && declared.Host != token.Host {
		return Identity{}, false, fault.New(fault.Denied,
			"host %q is not on this runner's token (it carries %q): a runner may narrow its placement, never widen it", declared.Host, token.Host)
	}
	var wider []string
	for k, v := range declared.Labels {
		if tv, ok := token.Labels[k]; !ok || tv != v {
			wider = append(wider, k+"="+v)
		}
	}
	if len(wider) > 0 {
		sort.Strings(wider)
		return Identity{}, false, fault.New(fault.Denied,
			"labels %s are not on this runner's token: a runner may narrow its placement, never widen it", strings.Join(wider, ", "))
	}
	id = Identity{Host: token.Host, Labels: maps.Clone(token.Labels)}
	if len(declared.Labels) > 0 {
		id.Labels = maps.Clone(declared.Labels)
	}
	if id.Labels == nil {
		id.Labels = map[string]string{}
	}
	return id, false, nil
}

// Matches says a group pinned to pin may be placed on a runner of identity
// id. The pin is a host (the runner's host, or its "host" label) or a
// "key=value" label selector; "" matches every runner. Keep in step with
// RunnerMatchesSQL.
func Matches(pin string, id Identity) bool {
	if pin == "" {
		return true
	}
	if k, v, ok := strings.Cut(pin, "="); ok {
		got, has := id.Labels[k]
		return has && got == v
	}
	return id.Host == pin || id.Labels["host"] == pin
}

// RunnerMatchesSQL is Matches as an SQL predicate over a runners row
// aliased r and a pin expression (a parameter or a column). It is never
// NULL (a missing label is no match), so NOT of it is safe.
func RunnerMatchesSQL(pin string) string {
	return fmt.Sprintf(`COALESCE(%[1]s = ''
		OR (strpos(%[1]s, '=') = 0 AND (r.host = %[1]s OR r.labels->>'host' = %[1]s))
		OR (strpos(%[1]s, '=') > 0 AND r.labels->>split_part(%[1]s, '=', 1) = substr(%[1]s, strpos(%[1]s, '=') + 1)), false)`, pin)
}
