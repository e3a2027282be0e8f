package console

import (
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// home is where sign-in goes when next is not a console page.
const home = "/holds"

// maxNext bounds a sign-in redirect target.
const maxNext = 2048

// pagePath is the shape of every console page path: segments of letters,
// digits and . _ ~ - (ids are of those), nothing escaped. Browsers drop
// tabs and newlines from a URL and read "\" as "/", so anything outside
// this set ("/\t/evil.example", "/\\evil.example", "/%2f/evil.example",
// a fullwidth solidus) could become a host in some browser.
var pagePath = regexp.MustCompile(`^(/[A-Za-z0-9._~-]+)*/?$`)

// canonicalTarget parses a sign-in redirect target strictly and re-emits
// it: a path of pagePath's shape (cleaned of dot segments) and an optional
// query, re-encoded. Anything else (a scheme, a host, "//" or "/\" at the
// start, a backslash, a control character raw or percent-encoded, a byte
// outside printable ASCII, a fragment) is refused.
func canonicalTarget(next string) (string, bool) {
	if next == "" || len(next) > maxNext || !strings.HasPrefix(next, "/") {
		return "", false
	}
	for i := 0; i < len(next); i++ {
		if b := next[i]; b <= ' ' || b >= 0x7f || b == '\\' || b == '#' {
			return "", false
		}
	}
	raw, query, _ := strings.Cut(next, "?")
	if !pagePath.MatchString(raw) || strings.Contains(raw, "//") {
		return "", false
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" || u.Path != raw {
		return "", false
	}
	clean := path.Clean(raw)
	if !strings.HasPrefix(clean, "/") || strings.HasPrefix(clean, "//") {
		return "", false
	}
	if query == "" {
		return clean, true
	}
	values, err := url.ParseQuery(query)
	if err != nil {
		return "", false
	}
	for k, vs := range values {
		for _, s := range append([]string{k}, vs...) {
			if !printable(s) {
				return "", false
			}
		}
	}
	return clean + "?" + values.Encode(), true
}

// printable: valid UTF-8 of printable characters (no C0 or C1 control,
// DEL, or invisible format character such as a bidi override).
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r != ' ' && !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// notAPage are console routes that are not somewhere to land after sign-in.
var notAPage = map[string]bool{"GET /signin": true, "GET /static/": true, "GET /events": true,
	"GET /signin/oidc": true, "GET /signin/oidc/callback": true}

// afterSignIn is where the browser goes once signed in: next re-emitted
// canonically when it is one of the console's pages, else home.
func (c *Console) afterSignIn(next string) string {
	target, ok := canonicalTarget(next)
	if !ok {
		return home
	}
	u, err := url.Parse(target)
	if err != nil {
		return home
	}
	_, pattern := c.mux.Handler(&http.Request{Method: http.MethodGet, URL: u, Host: "console"})
	if pattern == "" || notAPage[pattern] {
		return home
	}
	return target
}
