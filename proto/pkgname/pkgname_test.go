package pkgname

import "testing"

func TestNames(t *testing.T) {
	for _, c := range []struct {
		name     string
		apt, npm bool
	}{
		{"curl", true, true},
		{"g++", true, false},
		{"libssl3.0", true, true},
		{"@types/node", false, true},
		{"", false, false},
		{"-rf", false, false},
		{"curl; rm -rf /", false, false},
		{"Curl", false, false},
		{"@scope/", false, false},
	} {
		if got := Apt(c.name); got != c.apt {
			t.Errorf("Apt(%q) = %v, want %v", c.name, got, c.apt)
		}
		if got := Npm(c.name); got != c.npm {
			t.Errorf("Npm(%q) = %v, want %v", c.name, got, c.npm)
		}
	}
}
