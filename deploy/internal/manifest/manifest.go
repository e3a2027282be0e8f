// Package manifest reads rendered Kubernetes objects (decoded YAML) in the
// deploy tests: the kustomize base and the Helm chart walk the same shapes.
package manifest

// Obj is one decoded Kubernetes object.
type Obj map[string]any

// Kind is the object's kind.
func (o Obj) Kind() string { return Str(o, "kind") }

// Name is the object's metadata.name.
func (o Obj) Name() string { return Str(o, "metadata", "name") }

// Get walks nested maps by key; a missing step yields nil.
func Get(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			if o, isObj := v.(Obj); isObj {
				m = o
			} else {
				return nil
			}
		}
		v = m[p]
	}
	return v
}

// Str is the string at path ("" when absent or not a string).
func Str(v any, path ...string) string { s, _ := Get(v, path...).(string); return s }

// List is the list at path (nil when absent or not a list).
func List(v any, path ...string) []any { l, _ := Get(v, path...).([]any); return l }
