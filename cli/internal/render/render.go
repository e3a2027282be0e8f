// Package render prints API objects as aligned tables, as JSON (proto field
// names, enums as lower-case words) or as bare ids. Render functions take
// protos and a writer only, so golden tests can feed them fixed values.
package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"go.yaml.in/yaml/v3"

	"github.com/clawguard/clawguard/proto/enumword"
	"github.com/clawguard/clawguard/proto/holdview"
	"github.com/clawguard/clawguard/proto/jsonview"
)

// Printer writes command results in the chosen format.
type Printer struct {
	W     io.Writer
	JSON  bool // -o json, or -o yaml with YAML set: the structured output
	YAML  bool // -o yaml: the JSON value written as YAML
	Quiet bool // -q: ids only
	Wide  bool // -o wide: a table with the ids behind its names too
	// Names turns ids into names in tables (nil: ids as they are).
	Names holdview.Names
	// Viewer is the reader's user id when known ("you approved").
	Viewer string
	// Now is when ages are measured to (zero: the current time).
	Now time.Time
	// Views are how each message type prints (a type with none: its JSON).
	Views Views
}

func (p Printer) env() Env {
	e := Env{Names: p.Names, Viewer: p.Viewer, Now: p.Now}
	if e.Now.IsZero() {
		e.Now = time.Now()
	}
	return e
}

// Msgs turns a typed slice into the []proto.Message the printer takes.
func Msgs[T proto.Message](items []T) []proto.Message {
	out := make([]proto.Message, len(items))
	for i, m := range items {
		out[i] = m
	}
	return out
}

// List prints a list of messages of type typ (typ names the columns even
// when the list is empty). JSON: an array, never null.
func (p Printer) List(typ proto.Message, items []proto.Message) error {
	v := p.Views.of(typ)
	switch {
	case p.JSON:
		arr := make([]any, 0, len(items))
		for _, m := range items {
			j, err := JSONValue(m)
			if err != nil {
				return err
			}
			arr = append(arr, j)
		}
		return p.write(arr)
	case p.Quiet:
		for _, m := range items {
			if id := v.ID(m); id != "" {
				fmt.Fprintln(p.W, id)
			}
		}
		return nil
	}
	tw := newTab(p.W)
	var cols []Col
	for _, c := range v.Cols {
		if !c.Wide || p.Wide {
			cols = append(cols, c)
		}
	}
	headers := make([]string, len(cols))
	for i, c := range cols {
		headers[i] = c.Header
	}
	fmt.Fprintln(tw, strings.Join(headers, "\t"))
	e := p.env()
	for _, m := range items {
		cells := make([]string, len(cols))
		for i, c := range cols {
			cells[i] = Cell(c.Get(m, e))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// Object prints one created or fetched message: JSON object, its id, or a
// "FIELD: value" block.
func (p Printer) Object(m proto.Message) error {
	v := p.Views.of(m)
	switch {
	case p.JSON:
		j, err := JSONValue(m)
		if err != nil {
			return err
		}
		return p.write(j)
	case p.Quiet:
		if id := v.ID(m); id != "" {
			fmt.Fprintln(p.W, id)
		}
		return nil
	}
	tw := newTab(p.W)
	e := p.env()
	for _, c := range append(append([]Col(nil), v.Cols...), v.Detail...) {
		fmt.Fprintf(tw, "%s:\t%s\n", c.Header, Cell(c.Get(m, e)))
	}
	return tw.Flush()
}

// Done reports a mutation that returns nothing: a sentence for people, an
// empty JSON object for scripts, nothing when quiet.
func (p Printer) Done(sentence string) error {
	switch {
	case p.JSON:
		return p.write(map[string]any{})
	case p.Quiet:
		return nil
	}
	_, err := fmt.Fprintln(p.W, sentence)
	return err
}

// Value prints an arbitrary JSON-able value in JSON mode and text otherwise
// (used for small results with no message of their own).
func (p Printer) Value(v any, text string) error {
	if p.JSON {
		return p.write(v)
	}
	if p.Quiet {
		return nil
	}
	_, err := fmt.Fprintln(p.W, text)
	return err
}

func newTab(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }

// Cell keeps a table cell on one line and shows absence as "-".
func Cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return "-"
	}
	return s
}

// write prints a structured value: indented JSON, or YAML with -o yaml
// (the same value, so the same field names and enum words).
func (p Printer) write(v any) error {
	if p.YAML {
		return writeYAML(p.W, v)
	}
	return writeJSON(p.W, v)
}

func writeYAML(w io.Writer, v any) error {
	// Through JSON: json.Number and the well-known types' JSON forms become
	// plain YAML scalars.
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode yaml: %w", err)
	}
	var generic any
	if err := yaml.Unmarshal(b, &generic); err != nil {
		return fmt.Errorf("encode yaml: %w", err)
	}
	out, err := yaml.Marshal(generic)
	if err != nil {
		return fmt.Errorf("encode yaml: %w", err)
	}
	_, err = w.Write(out)
	return err
}

func writeJSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode json: %w", err)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// JSONValue is m as a JSON value, in the one shape the webhook posts too
// (jsonview): proto field names, every field present, enums as lower-case
// words ("allow", not "EFFECT_ALLOW"), 64-bit integers as numbers.
func JSONValue(m proto.Message) (any, error) { return jsonview.Value(m) }

// ParseEnum accepts a word ("request_approval", "request-approval", any
// case) or the full value name and returns its number.
func ParseEnum(ed protoreflect.EnumDescriptor, s string) (protoreflect.EnumNumber, error) {
	// People type the word loosely; enumword reads only the exact word.
	w := strings.ToLower(strings.ReplaceAll(strings.TrimSpace(s), "-", "_"))
	w = strings.TrimPrefix(w, strings.ToLower(enumword.Prefix(ed)))
	if n, err := enumword.NumberOf(ed, w); err == nil && n != 0 {
		return n, nil
	}
	return 0, fmt.Errorf("invalid value %q (want one of: %s)", s, strings.Join(enumword.Words(ed), ", "))
}
