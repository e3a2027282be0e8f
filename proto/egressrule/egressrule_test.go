package egressrule

import "testing"

func TestNormalizeHost(t *testing.T) {
	ok := map[string]string{
		"API.GitHub.com.":       "api.github.com",
		" example.org ":         "example.org",
		"[::1]":                 "::1",
		"::ffff:127.0.0.1":      "127.0.0.1",
		"169.254.169.254":       "169.254.169.254",
		"2001:DB8::1":           "2001:db8::1",
		"xn--bcher-kva.example": "xn--bcher-kva.example",
		"a_b.example.com":       "a_b.example.com",
	}
	for in, want := range ok {
		got, err := NormalizeHost(in)
		if err != nil || got != want {
			t.Errorf("NormalizeHost(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", ".", "a..b", "-a.com", "a-.com", "bücher.example", "a b.com", "fe80::1%eth0",
		"127.1", "0x7f.1", "2130706433", "host/path", "user@host", "a.com:443", "*.com", string(make([]byte, 254))} {
		if got, err := NormalizeHost(bad); err == nil {
			t.Errorf("NormalizeHost(%q) = %q, want an error", bad, got)
		}
	}
}

func TestNormalizePattern(t *testing.T) {
	ok := map[string]string{"*.GitHub.com": "*.github.com", "api.github.com": "api.github.com", "10.0.0.1": "10.0.0.1"}
	for in, want := range ok {
		if got, err := NormalizePattern(in); err != nil || got != want {
			t.Errorf("NormalizePattern(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"*", "*.com", "*.10.0.0.1", "a.*.com", "*github.com", "**.github.com", "api.*"} {
		if got, err := NormalizePattern(bad); err == nil {
			t.Errorf("NormalizePattern(%q) = %q, want an error", bad, got)
		}
	}
}

func TestMatches(t *testing.T) {
	cases := []struct {
		rule Rule
		host string
		port int
		want bool
	}{
		{Rule{Host: "*.github.com"}, "api.github.com", 443, true},
		{Rule{Host: "*.github.com"}, "a.b.github.com", 80, true},
		{Rule{Host: "*.github.com"}, "github.com", 443, false},
		{Rule{Host: "*.github.com"}, "evilgithub.com", 443, false},
		{Rule{Host: "*.github.com"}, "api.github.com", 22, false},
		{Rule{Host: "*.github.com", Port: 22}, "api.github.com", 22, true},
		{Rule{Host: "github.com"}, "github.com", 8443, false},
		{Rule{Host: "github.com", Port: 8443}, "github.com", 8443, true},
		{Rule{Host: "github.com", Port: 8443}, "github.com", 443, false},
		{Rule{Host: "*.0.0.1"}, "127.0.0.1", 443, false}, // never stored, and never matches an address
		{Rule{Host: "10.0.0.1"}, "10.0.0.1", 80, true},
	}
	for _, c := range cases {
		if got := c.rule.Matches(c.host, c.port); got != c.want {
			t.Errorf("%+v.Matches(%s, %d) = %v, want %v", c.rule, c.host, c.port, got, c.want)
		}
	}
}

func TestDecideMostRestrictiveWins(t *testing.T) {
	rules := []Rule{
		{Host: "*.example.com", Effect: EffectAllow},
		{Host: "secret.example.com", Effect: EffectDeny},
		{Host: "upload.example.com", Effect: EffectHold},
		{Host: "*.example.com", Port: 8080, Effect: EffectAllow},
		{Host: "odd.example.com", Effect: "maybe"},
	}
	cases := []struct {
		host, def string
		port      int
		want      string
		fromRule  bool
	}{
		{"www.example.com", "", 443, EffectAllow, true},
		{"secret.example.com", EffectAllow, 443, EffectDeny, true},
		{"upload.example.com", "", 443, EffectHold, true},
		{"upload.example.com", "", 8080, EffectAllow, true}, // the hold rule covers 443 and 80 only
		{"odd.example.com", "", 443, EffectDeny, true},      // an unknown effect fails closed
		{"other.org", "", 443, EffectHold, false},
		{"other.org", EffectDeny, 443, EffectDeny, false},
		{"other.org", EffectAllow, 443, EffectAllow, false},
		{"other.org", "bogus", 443, EffectDeny, false},
	}
	for _, c := range cases {
		a := Decide(rules, c.def, c.host, c.port)
		if a.Effect != c.want || (a.Rule != nil) != c.fromRule {
			t.Errorf("Decide(%s:%d, default %q) = %+v, want %s (from a rule: %v)", c.host, c.port, c.def, a, c.want, c.fromRule)
		}
	}
}

func TestParsePort(t *testing.T) {
	for _, bad := range []string{"", "0", "65536", "+443", "0443", "44 3", "-1"} {
		if _, err := ParsePort(bad); err == nil {
			t.Errorf("ParsePort(%q) succeeded", bad)
		}
	}
	if n, err := ParsePort("443"); err != nil || n != 443 {
		t.Errorf("ParsePort(443) = %d, %v", n, err)
	}
}

func TestDestination(t *testing.T) {
	if got := Destination("::1", 443); got != "[::1]:443" {
		t.Errorf("Destination(::1) = %s", got)
	}
	if got := (Rule{Host: "*.a.com"}).Describe(); got != "*.a.com (443, 80)" {
		t.Errorf("Describe = %s", got)
	}
}
