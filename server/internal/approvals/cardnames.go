package approvals

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/clawguard/clawguard/server/internal/rpcdecl"
)

// groupIDPattern is the shape of a generated agent group id.
var groupIDPattern = regexp.MustCompile(`\bag_[0-9a-f]{16}\b`)

// nameGroups rewrites the generated group ids a card's title and question
// carry (the runner knows its sessions' groups by id only) into the groups'
// names, at creation: every surface that shows the card — console, ncl,
// chat cards, webhook bodies — then reads "research wants to send a message
// to ops", not "ag_5f44f5b6ed84603d wants …". The hold's agent_group_id and
// payload keep the ids, one step away. An id with no group stays as it is.
//
// Only the card's own words are rewritten, never the requester's: an id
// inside text the payload carries (a message, a command's argument) is left
// exactly as it will be sent (agentSpans), so what the approver reads is
// what runs (issue 41).
func nameGroups(ctx context.Context, tx pgx.Tx, payload *structpb.Struct, resource map[string]string, texts ...*string) error {
	var ids []string
	for _, t := range texts {
		ids = append(ids, groupIDPattern.FindAllString(*t, -1)...)
	}
	if len(ids) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, `SELECT id, name FROM agent_groups WHERE id = ANY($1) AND name <> ''`, ids)
	if err != nil {
		return fmt.Errorf("name the card's groups: %w", err)
	}
	defer rows.Close()
	names := map[string]string{}
	for rows.Next() {
		var id, name string
		if err := rows.Scan(&id, &name); err != nil {
			return fmt.Errorf("name the card's groups: %w", err)
		}
		names[id] = name
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("name the card's groups: %w", err)
	}
	words := agentWords(payload, resource)
	for _, t := range texts {
		*t = renameOutside(*t, names, agentSpans(*t, words))
	}
	return nil
}

// renameOutside replaces each id of names in text by its name, except where
// it lies in one of the spans.
func renameOutside(text string, names map[string]string, spans [][2]int) string {
	var sb strings.Builder
	last := 0
	for _, m := range groupIDPattern.FindAllStringIndex(text, -1) {
		name, ok := names[text[m[0]:m[1]]]
		if !ok || inSpan(m, spans) {
			continue
		}
		sb.WriteString(text[last:m[0]])
		sb.WriteString(name)
		last = m[1]
	}
	sb.WriteString(text[last:])
	return sb.String()
}

func inSpan(m []int, spans [][2]int) bool {
	for _, s := range spans {
		if m[0] < s[1] && m[1] > s[0] {
			return true
		}
	}
	return false
}

// agentWords are the payload's strings that carry a group id and are the
// requester's own words: not the references the hold's decided resource
// names (a2a's "to"), nor a held command's fields that name a group
// ((guard.v1.names_group), filled in or resolved by the server).
func agentWords(payload *structpb.Struct, resource map[string]string) []string {
	var refs map[string]bool
	method := payload.GetFields()["method"].GetStringValue()
	if method != "" {
		refs = map[string]bool{}
		for _, p := range rpcdecl.MethodGroupFields(method) {
			refs["request."+p] = true
		}
	}
	var out []string
	var walk func(path string, v *structpb.Value)
	walk = func(path string, v *structpb.Value) {
		switch x := v.GetKind().(type) {
		case *structpb.Value_StringValue:
			if refs[path] || !groupIDPattern.MatchString(x.StringValue) {
				return
			}
			out = append(out, x.StringValue)
		case *structpb.Value_StructValue:
			for k, f := range x.StructValue.GetFields() {
				walk(strings.TrimPrefix(path+"."+k, "."), f)
			}
		case *structpb.Value_ListValue:
			for _, f := range x.ListValue.GetValues() {
				walk(path, f)
			}
		}
	}
	for k, v := range payload.GetFields() {
		if r, ok := resource[k]; ok && r == v.GetStringValue() {
			continue // the decided resource: a reference, shown by name
		}
		walk(k, v)
	}
	return out
}

// agentSpans are where text shows the requester's words: each word as it
// is, quoted (%q) or JSON-escaped, in whole or cut short (a card clips long
// text) — the stretch from its start through each group id in it.
func agentSpans(text string, words []string) [][2]int {
	var spans [][2]int
	for _, w := range words {
		for _, form := range shownForms(w) {
			for _, m := range groupIDPattern.FindAllStringIndex(form, -1) {
				prefix := form[:m[1]]
				for at := 0; ; {
					i := strings.Index(text[at:], prefix)
					if i < 0 {
						break
					}
					spans = append(spans, [2]int{at + i + m[0], at + i + m[1]})
					at += i + 1
				}
			}
		}
	}
	return spans
}

// shownForms are the ways a card may write a string: as it is, as Go's %q
// writes it, and as JSON writes it inside a string.
func shownForms(w string) []string {
	forms := []string{w}
	if q := strconv.Quote(w); q[1:len(q)-1] != w {
		forms = append(forms, q[1:len(q)-1])
	}
	if b, err := json.Marshal(w); err == nil && string(b[1:len(b)-1]) != w {
		forms = append(forms, string(b[1:len(b)-1]))
	}
	return forms
}
