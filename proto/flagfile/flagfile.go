// Package flagfile reads a binary's settings from a YAML file whose keys are
// its flags' names, so the file cannot drift from the flags: a flag added
// is a key the file takes, and a key that names no flag is refused.
//
// Precedence is the command line, then the environment, then the file,
// then the defaults: Apply leaves alone every flag set on the command line
// and every flag whose environment twin is set.
package flagfile

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// Apply sets fs's flags from the file at path (nothing when path is ""),
// after fs.Parse. fromEnv says whether a flag's value came from its
// environment twin (then the file does not override it).
func Apply(fs *flag.FlagSet, path string, fromEnv func(flagName string) bool) error {
	if path == "" {
		return nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	var doc map[string]yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("--config %s: %w", path, err)
	}
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	keys := make([]string, 0, len(doc))
	for k := range doc {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		node := doc[key]
		f := fs.Lookup(key)
		if f == nil || key == "config" {
			return fmt.Errorf("--config %s line %d: %q is not a setting (the keys are the flags' names, see --help)", path, node.Line, key)
		}
		if fromEnv(key) || onCommandLine[key] {
			continue
		}
		values, err := scalars(&node)
		if err != nil {
			return fmt.Errorf("--config %s line %d: %s: %w", path, node.Line, key, err)
		}
		for _, v := range values {
			if err := fs.Set(key, v); err != nil {
				return fmt.Errorf("--config %s line %d: %s: %w", path, node.Line, key, err)
			}
		}
	}
	return nil
}

// scalars is a value as flag text: a scalar, or each item of a list (a
// repeatable flag).
func scalars(n *yaml.Node) ([]string, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return nil, fmt.Errorf("no value")
		}
		return []string{n.Value}, nil
	case yaml.SequenceNode:
		out := make([]string, 0, len(n.Content))
		for _, item := range n.Content {
			if item.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("a list of plain values, please")
			}
			out = append(out, item.Value)
		}
		return out, nil
	case yaml.MappingNode:
		// key: value pairs of a KEY=VALUE flag (the runner's --agent-env).
		out := make([]string, 0, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			out = append(out, n.Content[i].Value+"="+n.Content[i+1].Value)
		}
		return out, nil
	}
	return nil, fmt.Errorf("want a value, a list or a map, not %s", strconv.Quote(n.Tag))
}
