package placement

import (
	"maps"
	"testing"

	"github.com/clawguard/clawguard/server/internal/fault"
)

func TestNarrowNeverWidens(t *testing.T) {
	token := Identity{Host: "h1", Labels: map[string]string{"gpu": "true", "zone": "eu"}}
	cases := []struct {
		name     string
		token    Identity
		declared Identity
		want     Identity
		ignored  bool
		denied   bool
	}{
		{"nothing declared: the token's", token, Identity{}, token, false, false},
		{"the same host", token, Identity{Host: "h1"}, token, false, false},
		{"a subset of labels", token, Identity{Labels: map[string]string{"zone": "eu"}}, Identity{Host: "h1", Labels: map[string]string{"zone": "eu"}}, false, false},
		{"another host", token, Identity{Host: "h2"}, Identity{}, false, true},
		{"a label the token lacks", token, Identity{Labels: map[string]string{"host": "h9"}}, Identity{}, false, true},
		{"a label with another value", token, Identity{Labels: map[string]string{"zone": "us"}}, Identity{}, false, true},
		{"unbound token: declarations ignored", Identity{}, Identity{Host: "h1", Labels: map[string]string{"gpu": "true"}}, Identity{Labels: map[string]string{}}, true, false},
		{"unbound token, nothing declared", Identity{}, Identity{}, Identity{Labels: map[string]string{}}, false, false},
	}
	for _, c := range cases {
		got, ignored, err := Narrow(c.token, c.declared)
		if c.denied {
			if !fault.Is(err, fault.Denied) {
				t.Errorf("%s: %v, want PermissionDenied", c.name, err)
			}
			continue
		}
		if err != nil || ignored != c.ignored || got.Host != c.want.Host || !maps.Equal(got.Labels, c.want.Labels) {
			t.Errorf("%s: %+v ignored=%v err=%v, want %+v ignored=%v", c.name, got, ignored, err, c.want, c.ignored)
		}
	}
}

func TestMatches(t *testing.T) {
	id := Identity{Host: "box-7", Labels: map[string]string{"host": "h1", "gpu": "true"}}
	for pin, want := range map[string]bool{
		"":          true,
		"box-7":     true,
		"h1":        true, // the host label
		"h2":        false,
		"gpu=true":  true,
		"gpu=false": false,
		"zone=eu":   false,
		"gpu":       false, // a host named gpu, not a label
	} {
		if got := Matches(pin, id); got != want {
			t.Errorf("Matches(%q) = %v, want %v", pin, got, want)
		}
	}
	if Matches("h1", Identity{}) || !Matches("", Identity{}) {
		t.Error("an unbound runner matches only unpinned groups")
	}
}
