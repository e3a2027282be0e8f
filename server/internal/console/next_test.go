package console

import (
	"strings"
	"testing"
)

// OffSiteTargets are sign-in redirect targets a browser could read as
// another site (or that carry a character it would drop or rewrite): each
// must land on the console's home. Browsers drop tab, CR and LF anywhere in
// a URL, read "\" as "/", and some decode escapes before resolving.
var OffSiteTargets = []string{
	"//evil.example/x",
	"/\t/evil.example/x",
	"/\n/evil.example/x",
	"/\r/evil.example/x",
	"/\r\n/evil.example/x",
	"\t//evil.example/x",
	"/\x00/evil.example",
	"/\x0b/evil.example",
	"/\x0c/evil.example",
	"/\x1f/evil.example",
	"/\x7f/evil.example",
	"/ /evil.example",
	"/\\evil.example",
	"\\/evil.example",
	"/\\/evil.example",
	"\\\\evil.example",
	"/holds\\..\\..\\evil",
	"/%09/evil.example",
	"/%0a/evil.example",
	"/%0d%0a/evil.example",
	"/%2f/evil.example",
	"/%2F%2Fevil.example",
	"/%5cevil.example",
	"/%5C%5Cevil.example",
	"/%252f/evil.example",
	"/.%2f/evil.example",
	"///evil.example",
	"/./\\evil.example",
	"https://evil.example/",
	"http:evil.example",
	"javascript:alert(1)",
	"JaVaScRiPt:alert(1)",
	"data:text/html,<script>alert(1)</script>",
	"evil.example",
	"@evil.example",
	"/@evil.example",
	"//user@evil.example",
	"/\u2215evil.example",            // division slash
	"/\uff0f\uff0fevil.example",      // fullwidth solidus
	"/\u3002evil.example",            // ideographic full stop
	"/holds\u202e/x",                 // right-to-left override
	"/\u00a0/evil.example",           // no-break space
	"/\u2028/evil.example",           // line separator
	"/\xc0\xafevil.example",          // overlong "/"
	"/holds?next=%0d%0aSet-Cookie:x", // decoded query with a control character
	"/holds?q=%e2%80%ae",             // decoded bidi override
	"/holds?q=%ff",                   // not UTF-8 once decoded
	"/holds#//evil.example",
	"/signin",
	"/signin?next=//evil.example",
	"/static/app.js",
	"/events",
	"/nowhere",
	"",
	"holds",
	"/" + strings.Repeat("a", 3000),
}

func TestSignInTargetIsAConsolePage(t *testing.T) {
	c := New(Deps{})
	for _, next := range OffSiteTargets {
		if got := c.afterSignIn(next); got != home {
			t.Errorf("afterSignIn(%q) = %q, want %q", next, got, home)
		}
	}
	for next, want := range map[string]string{
		"/holds":                            "/holds",
		"/holds/":                           "/holds",
		"/holds/hold_3266c0872182ee7add9f":  "/holds/hold_3266c0872182ee7add9f",
		"/holds/./x/../hold_1":              "/holds/hold_1",
		"/decisions?effect=deny&group=ag_1": "/decisions?effect=deny&group=ag_1",
		"/decisions?group=a+b&since=2026-01-02T03:04:05Z": "/decisions?group=a+b&since=2026-01-02T03%3A04%3A05Z",
		"/":         "/",
		"/whatif":   "/whatif",
		"/policies": "/policies",
	} {
		if got := c.afterSignIn(next); got != want {
			t.Errorf("afterSignIn(%q) = %q, want %q", next, got, want)
		}
	}
}

// Whatever canonicalTarget accepts is re-emitted as a path a browser
// resolves on this site: one leading "/", printable ASCII, no backslash.
func TestCanonicalTargetsStayOnSite(t *testing.T) {
	for _, next := range append(OffSiteTargets, "/holds", "/decisions?x=%2F%2Fevil", "/a/./b/../../c") {
		got, ok := canonicalTarget(next)
		if !ok {
			continue
		}
		if !strings.HasPrefix(got, "/") || strings.HasPrefix(got, "//") || strings.ContainsAny(got, "\\\t\r\n #") {
			t.Errorf("canonicalTarget(%q) = %q: not an on-site path", next, got)
		}
		for i := 0; i < len(got); i++ {
			if got[i] < 0x21 || got[i] > 0x7e {
				t.Errorf("canonicalTarget(%q) = %q: byte %#x", next, got, got[i])
			}
		}
	}
}
