package holdview

import (
	"regexp"
	"strings"
	"unicode/utf8"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Words is text the server wrote about a decision (an explanation, a
// decision's reason, a watch line) with the ids in it named for the reader:
// a group id becomes the group's name and a user id the user's display
// name, where n knows them — n is read as the reader, so it knows exactly
// the names the reader may see. Ids n does not know stay as they are (or,
// for a group, become what a readable group's destination calls it, when n
// says so). The server's text is written in ids; this is the one place it
// is put in names, at the edge that shows it.
//
// Quoted text ("…" or “…”) is left alone, byte for byte: it is where the
// server quotes what an agent or a person wrote.
func Words(n Names, s string) string {
	if n == nil || s == "" {
		return s
	}
	var b strings.Builder
	quote := rune(0) // the closing quote while inside a quoted span
	flag := false    // the last word was a command's flag (--from)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
			if r == '\\' && quote == '"' && i+size < len(s) {
				b.WriteString(s[i : i+size+1]) // an escaped character in a Go-quoted string
				i += size + 1
				continue
			}
		case r == '"':
			quote = '"'
		case r == '“':
			quote = '”'
		case wordDelim(r):
		default:
			j := i
			for j < len(s) {
				r2, sz := utf8.DecodeRuneInString(s[j:])
				if wordDelim(r2) || r2 == '"' || r2 == '“' {
					break
				}
				j += sz
			}
			w := s[i:j]
			named := nameWord(n, w)
			if flag && named != w {
				named = shellWord(named) // an argument of a command the reader may paste
			}
			flag = strings.HasPrefix(w, "--")
			b.WriteString(named)
			i = j
			continue
		}
		b.WriteString(s[i : i+size])
		i += size
	}
	return b.String()
}

// wordDelim ends a word that may be an id.
func wordDelim(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\r', ',', ';', '(', ')', '[', ']', '{', '}', '<', '>', '=', '→', '\'':
		return true
	}
	return false
}

// GroupWords is a Names that says which words may be group ids: the ids
// of the groups it knows, and any word shaped like the ids the server
// makes. Words asks it before GroupName, so an ordinary word never makes a
// book read what other groups' destinations call a group.
type GroupWords interface {
	MayBeGroup(word string) bool
}

// generatedGroupID is the shape of the group ids the server makes
// (store.NewID("ag_", 8)).
var generatedGroupID = regexp.MustCompile(`^ag_[0-9a-f]{16}$`)

// LooksLikeGroupID says whether w has the shape of a group id the server
// makes.
func LooksLikeGroupID(w string) bool { return generatedGroupID.MatchString(w) }

func mayBeGroup(n Names, w string) bool {
	if w == "" {
		return false
	}
	if g, ok := n.(GroupWords); ok {
		return g.MayBeGroup(w)
	}
	return LooksLikeGroupID(w)
}

// userWord is a namespaced user id ("telegram:dana").
var userWord = regexp.MustCompile(`^[a-z0-9_-]+:\S+$`)

// nameWord names one word: a whole word that is a user id the reader
// knows, else each part of it (between colons) that may be a group id
// ("group:ag_…") and is one the reader knows. A sentence's closing
// punctuation stays outside the id.
func nameWord(n Names, w string) string {
	core := strings.TrimRight(w, ".:")
	tail := w[len(core):]
	if userWord.MatchString(core) {
		if name := n.UserName(core); name != "" {
			return name + tail
		}
	}
	parts := strings.Split(core, ":")
	for i, p := range parts {
		if mayBeGroup(n, p) {
			parts[i] = Group(n, p)
		}
	}
	return strings.Join(parts, ":") + tail
}

// shellWord is a name as one shell word: as it is when it is plain, else
// single-quoted.
func shellWord(s string) string {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:@/+,%=", r)) {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}

// RuleWords says who may resolve a hold with this rule and scope, each
// person and the group named by person and group (nil: by id): the guard's
// explanations and the console's hold page say it so.
func RuleWords(rule *guardv1.ApproverRule, scope guardv1.ApproverScope, person, group func(id string) string) string {
	if person == nil {
		person = func(id string) string { return id }
	}
	if group == nil {
		group = func(id string) string { return id }
	}
	var who string
	switch r := rule.GetKind().(type) {
	case *guardv1.ApproverRule_Exclusive:
		var named []string
		for _, u := range append([]string{r.Exclusive.GetUserId()}, r.Exclusive.GetAlsoUserIds()...) {
			named = append(named, person(u))
		}
		who = "only " + strings.Join(named, ", ") + " (nobody else, not even an owner)"
	case *guardv1.ApproverRule_AdminsOfScope:
		if g := r.AdminsOfScope.GetAgentGroupId(); g != "" {
			who = "admins of group " + group(g) + ", global admins and owners"
		} else {
			who = "global admins and owners"
		}
		if u := r.AdminsOfScope.GetDeliveredTo(); u != "" {
			who += ", and " + person(u) + " (the approver it was delivered to)"
		}
	default:
		return "nobody (the hold has no approver rule)"
	}
	if esc := rule.GetEscalatedUserIds(); len(esc) > 0 {
		var added []string
		for _, u := range esc {
			added = append(added, person(u))
		}
		who += ", and " + strings.Join(added, ", ") + " (added by its escalation)"
	}
	if scope == guardv1.ApproverScope_APPROVER_SCOPE_GLOBAL {
		return who + "; global scope: the clicker must also be an owner or a global admin"
	}
	return who + "; group scope"
}
