package render

import (
	"fmt"
	"io"
	"strings"

	"google.golang.org/protobuf/proto"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/holdview"
)

// Explained prints a decision (or a decision log row) with its explanation:
// JSON — the object with an "explanation" key; text — the object's block,
// then the explanation in words (the console's "why" page, line for line).
func (p Printer) Explained(m proto.Message, x *guardv1.Explanation) error {
	if p.JSON {
		j, err := JSONValue(m)
		if err != nil {
			return err
		}
		if obj, ok := j.(map[string]any); ok && x != nil {
			if obj["explanation"], err = JSONValue(x); err != nil {
				return err
			}
		}
		return writeJSON(p.W, j)
	}
	if err := p.Object(m); err != nil || p.Quiet || x == nil {
		return err
	}
	return Explanation(p.W, x, p.Names)
}

// Explanation writes an explanation in words, the groups and users in it
// by name where n knows them (the facts as read stay in -o json).
func Explanation(w io.Writer, x *guardv1.Explanation, n holdview.Names) error {
	var b strings.Builder
	say := func(s string) string { return holdview.Words(n, s) }
	fmt.Fprintf(&b, "\nWHY: %s\n", say(x.GetSummary()))
	if e := x.GetEntry(); e != nil {
		switch {
		case !e.GetInCatalog():
			fmt.Fprintf(&b, "CATALOG: %s is not in the catalog\n", e.GetAction())
		case e.GetApprovalAction() != "":
			fmt.Fprintf(&b, "CATALOG: %s — %s (holds become %s approvals)\n", e.GetAction(), e.GetDescription(), e.GetApprovalAction())
		default:
			fmt.Fprintf(&b, "CATALOG: %s — %s (never holds)\n", e.GetAction(), e.GetDescription())
		}
	}
	if len(x.GetChecks()) > 0 {
		b.WriteString("CHECKS:\n")
		for i, c := range x.GetChecks() {
			fmt.Fprintf(&b, "  %d. %s: %s — %s\n", i+1, c.GetName(), c.GetOutcome(), say(c.GetDetail()))
			for _, f := range c.GetFacts() {
				if line := holdview.Fact(n, f.GetName(), f.GetValue(), f.GetPresent()); line != "" {
					fmt.Fprintf(&b, "       read: %s\n", line)
				}
			}
		}
	}
	if x.GetGrant() != "" {
		fmt.Fprintf(&b, "GRANT: %s\n", x.GetGrant())
	}
	if len(x.GetWouldChange()) > 0 {
		b.WriteString("WOULD CHANGE THE ANSWER:\n")
		for _, s := range x.GetWouldChange() {
			fmt.Fprintf(&b, "  - %s\n", say(s))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
