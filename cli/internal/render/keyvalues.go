package render

import (
	"sort"
	"strings"
)

// KeyValues prints a map as sorted KEY=VALUE words ("-" when empty).
func KeyValues(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k + "=" + m[k]
	}
	return strings.Join(out, " ")
}
