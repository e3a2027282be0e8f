package render

import (
	"fmt"
	"io"
	"strings"

	"google.golang.org/protobuf/proto"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
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
	return Explanation(p.W, x)
}

// Explanation writes an explanation in words.
func Explanation(w io.Writer, x *guardv1.Explanation) error {
	var b strings.Builder
	fmt.Fprintf(&b, "\nWHY: %s\n", x.GetSummary())
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
			fmt.Fprintf(&b, "  %d. %s: %s — %s\n", i+1, c.GetName(), c.GetOutcome(), c.GetDetail())
			for _, f := range c.GetFacts() {
				v := f.GetValue()
				if !f.GetPresent() {
					v = "(absent)"
				}
				fmt.Fprintf(&b, "       read %s = %s\n", f.GetName(), v)
			}
		}
	}
	if x.GetGrant() != "" {
		fmt.Fprintf(&b, "GRANT: %s\n", x.GetGrant())
	}
	if len(x.GetWouldChange()) > 0 {
		b.WriteString("WOULD CHANGE THE ANSWER:\n")
		for _, s := range x.GetWouldChange() {
			fmt.Fprintf(&b, "  - %s\n", s)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
