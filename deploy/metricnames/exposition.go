package metricnames

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// ParseExposition reads a /metrics body in the Prometheus text format and
// returns the families it exports: "# TYPE" lines give name and type; a sample
// of a family with no TYPE line counts as untyped. Use it on a live scrape or
// on the output of the listnames commands, then call Missing.
func ParseExposition(r io.Reader) (Exported, error) {
	exported := Exported{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "":
		case strings.HasPrefix(line, "# TYPE "):
			f := strings.Fields(line)
			if len(f) != 4 {
				return nil, fmt.Errorf("malformed TYPE line %q", line)
			}
			exported[f[2]] = f[3]
		case strings.HasPrefix(line, "#"):
		default:
			name := line
			if i := strings.IndexAny(line, "{ "); i >= 0 {
				name = line[:i]
			}
			if !familyOf(name, exported) {
				exported[name] = "untyped"
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read exposition: %w", err)
	}
	return exported, nil
}

// familyOf reports whether a sample name belongs to an already-typed family.
func familyOf(sample string, exported Exported) bool {
	return exported[sample] != "" || providedBySeries(sample, exported)
}
