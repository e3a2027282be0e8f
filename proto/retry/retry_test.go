package retry

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Issue 29: three runners reconnecting after a server restart printed the
// same delays — 9 of the repository's 10 back-off literals had no jitter.
// Back-offs made together now wait different times, each within its step.
func TestBackOffsStartedTogetherDoNotWaitInLockstep(t *testing.T) {
	const runners, steps = 3, 6
	delays := make([][]time.Duration, runners)
	for i := range runners {
		b := Exponential(100*time.Millisecond, 5*time.Second)
		for range steps {
			delays[i] = append(delays[i], b.NextBackOff())
		}
	}
	step := 100 * time.Millisecond
	for s := range steps {
		for i := range runners {
			if !Around(delays[i][s], step) {
				t.Fatalf("runner %d, attempt %d: %v is not within ±%.0f%% of %v", i, s, delays[i][s], Jitter*100, step)
			}
		}
		step = min(2*step, 5*time.Second)
	}
	if slices.Equal(delays[0], delays[1]) || slices.Equal(delays[1], delays[2]) || slices.Equal(delays[0], delays[2]) {
		t.Fatalf("back-offs made together waited the same: %v", delays)
	}
}

// The guard against the next jitter-free back-off: outside the modules'
// retry helpers, the repository may mention backoff.ExponentialBackOff only
// as a pointer type (something Exponential made). A literal, new() or a
// value-typed field or variable is a back-off with RandomizationFactor 0.
func TestEveryBackOffInTheRepositoryComesFromAHelper(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.work")); err != nil {
		t.Fatalf("repository root not found from %s: %v", root, err)
	}
	var bad []string
	files, helpers := 0, 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		if isHelper(rel) {
			helpers++
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		for _, v := range jitterless(t, rel, src) {
			bad = append(bad, v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 || helpers != 1 {
		t.Fatalf("walked %d Go files and %d retry helpers: not the repository", files, helpers)
	}
	if len(bad) > 0 {
		t.Fatalf("back-offs without jitter (use proto/retry.Exponential):\n  %s", strings.Join(bad, "\n  "))
	}
}

// The check finds what it is for (a check that finds nothing proves nothing).
func TestJitterlessFindsLiteralsNewAndValueTypes(t *testing.T) {
	src := `package x
import bo "github.com/cenkalti/backoff/v5"
type loop struct{ d bo.ExponentialBackOff; ok *bo.ExponentialBackOff }
var a = bo.ExponentialBackOff{InitialInterval: 1}
var b = &bo.ExponentialBackOff{}
var c = new(bo.ExponentialBackOff)
var fine = bo.NewExponentialBackOff()
func f() *bo.ExponentialBackOff { return fine }
`
	got := jitterless(t, "x.go", []byte(src))
	if len(got) != 4 {
		t.Fatalf("found %d of 4: %v", len(got), got)
	}
}

func isHelper(rel string) bool { return rel == filepath.Join("proto", "retry", "retry.go") }

// jitterless lists the mentions of backoff.ExponentialBackOff in src that
// are not a pointer type.
func jitterless(t *testing.T, name string, src []byte) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse %s: %v", name, err)
	}
	pkg := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "github.com/cenkalti/backoff/v5" {
			pkg = "backoff"
			if imp.Name != nil {
				pkg = imp.Name.Name
			}
		}
	}
	if pkg == "" {
		return nil
	}
	isType := func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "ExponentialBackOff" {
			return false
		}
		id, ok := sel.X.(*ast.Ident)
		return ok && id.Name == pkg
	}
	pointed := map[ast.Node]bool{}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		if star, ok := n.(*ast.StarExpr); ok && isType(star.X) {
			pointed[star.X] = true
		}
		if isType(n) && !pointed[n] {
			out = append(out, fset.Position(n.Pos()).String())
		}
		return true
	})
	return out
}
