package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// plainVia sends one raw request through the proxy and reads the answer.
func plainVia(t *testing.T, sock, raw string) *http.Response {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	io.WriteString(c, raw)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	return resp
}

// A plain-HTTP request goes out in origin form with the decided host, its
// proxy headers stripped; the response comes back whole.
func TestPlainHTTPForwarded(t *testing.T) {
	r := newRig(t, DefaultLimits)
	var mu sync.Mutex
	var seen *http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		seen = req.Clone(req.Context())
		mu.Unlock()
		w.Header().Set("X-Upstream", "yes")
		fmt.Fprint(w, "hello from upstream")
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	r.names.answers["plain.test"] = [][]netip.Addr{{netip.MustParseAddr("127.0.0.1")}}
	host := "plain.test:" + u.Port()
	r.guard.answers[host] = guardv1.Effect_EFFECT_ALLOW
	resp := plainVia(t, r.sock, "GET http://"+host+"/path?q=1 HTTP/1.1\r\nHost: "+host+"\r\nProxy-Authorization: Basic c2VjcmV0\r\nX-Agent: 1\r\n\r\n")
	if b := body(resp); resp.StatusCode != 200 || b != "hello from upstream" || resp.Header.Get("X-Upstream") != "yes" {
		t.Fatalf("forwarded: %s %q", resp.Status, b)
	}
	mu.Lock()
	defer mu.Unlock()
	if seen.RequestURI != "/path?q=1" || seen.Host != host || seen.Header.Get("Proxy-Authorization") != "" || seen.Header.Get("X-Agent") != "1" {
		t.Fatalf("upstream saw %s %s host %s headers %v", seen.Method, seen.RequestURI, seen.Host, seen.Header)
	}
}

func TestPlainHTTPRefusals(t *testing.T) {
	r := newRig(t, DefaultLimits)
	cases := map[string]int{
		// The proxy opens no TLS itself.
		"GET https://example.org/ HTTP/1.1\r\nHost: example.org\r\n\r\n": 400,
		// A Host that disagrees with the URL.
		"GET http://example.org/ HTTP/1.1\r\nHost: evil.example\r\n\r\n": 400,
		// Origin form is not a proxy request.
		"GET / HTTP/1.1\r\nHost: example.org\r\n\r\n": 400,
		// Credentials in the URL.
		"GET http://user:pw@example.org/ HTTP/1.1\r\n\r\n": 400,
		// Denied by the guard (the fake denies what it does not know).
		"GET http://example.org/ HTTP/1.1\r\nHost: example.org\r\n\r\n": 0,
	}
	r.names.answers["example.org"] = [][]netip.Addr{{netip.MustParseAddr("93.184.216.34")}}
	for raw, want := range cases {
		resp := plainVia(t, r.sock, raw)
		if want == 0 {
			want = 403
		}
		if resp.StatusCode != want || !strings.HasPrefix(body(resp), "clawguard: ") {
			t.Errorf("%q: %s, want %d", raw, resp.Status, want)
		}
	}
	if asked := r.guard.asked(); len(asked) != 1 || asked[0] != "example.org:80" {
		t.Fatalf("the guard was asked %v, want example.org:80 once", asked)
	}
}

// Origin-form requests on the same socket go to the session's other
// endpoint (the model gateway), keep-alive and streamed.
func TestOriginFormGoesToTheSessionsHandler(t *testing.T) {
	r := newRig(t, DefaultLimits)
	r.proxy.cfg.Origin = func(s Session) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: %s %s for %s\n\n", req.Method, req.URL.Path, s.ID)
			w.(http.Flusher).Flush()
		})
	}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", r.sock)
	}}}
	for i := 0; i < 2; i++ { // the second request reuses the connection
		resp, err := client.Post("http://127.0.0.1:3128/v1/messages", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		if b := body(resp); resp.StatusCode != 200 || b != "data: POST /v1/messages for s1\n\n" {
			t.Fatalf("origin form: %s %q", resp.Status, b)
		}
	}
	if asked := r.guard.asked(); len(asked) != 0 {
		t.Fatalf("an origin-form request was decided as a connection: %v", asked)
	}
}
