package modelgw

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"

	"github.com/clawguard/clawguard/proto/modelrule"
)

// What of the agent's request reaches the provider: the headers of its
// API (anthropic-*, openai-*: versions and betas) and what says what it
// accepts; never an auth header (the gateway sets the provider's key), nor
// a header that would steer the upstream host or the account (Host,
// Forwarded, X-Forwarded-*, OpenAI-Organization, OpenAI-Project: the
// operator's key decides whose account pays).
var steering = map[string]bool{
	"openai-organization": true,
	"openai-project":      true,
}

// outHeader is the header set the provider receives.
func outHeader(in http.Header, kind, credential string) http.Header {
	out := http.Header{}
	for k, vs := range in {
		lk := strings.ToLower(k)
		if (strings.HasPrefix(lk, "anthropic-") || strings.HasPrefix(lk, "openai-")) && !steering[lk] {
			out[k] = append([]string(nil), vs...)
		}
	}
	for _, k := range []string{"Accept", "User-Agent"} {
		if v := in.Get(k); v != "" {
			out.Set(k, v)
		}
	}
	out.Set("Content-Type", "application/json")
	if kind == modelrule.KindAnthropic {
		if out.Get("Anthropic-Version") == "" {
			out.Set("Anthropic-Version", "2023-06-01")
		}
		if credential != "" {
			out.Set("X-Api-Key", credential)
		}
	} else if credential != "" {
		out.Set("Authorization", "Bearer "+credential)
	}
	return out
}

// upstreamURL is the provider's URL of a route; of the agent's query only
// Anthropic's beta=true (its SDKs' beta endpoints) is kept.
func upstreamURL(base string, rt route, q url.Values) (*url.URL, error) {
	u, err := url.Parse(base + rt.upstream)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("the provider's base URL %q is not an http(s) URL", base)
	}
	if rt.kind == modelrule.KindAnthropic && q.Get("beta") == "true" {
		u.RawQuery = "beta=true"
	}
	return u, nil
}

// forwarding is one call on its way to the provider.
type forwarding struct {
	target     *url.URL
	header     http.Header
	body       []byte
	rt         route
	onResponse func(status int, body *meteredBody) // the meter, wired
	onFailure  func(err error)                     // the provider could not be reached
}

// forward sends the call and streams the answer back as it comes (no
// buffering: FlushInterval -1), through the meter.
func (g *Gateway) forward(w http.ResponseWriter, r *http.Request, f forwarding) {
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = f.target
			pr.Out.Host = ""
			pr.Out.Header = f.header
			pr.Out.Body = io.NopCloser(bytes.NewReader(f.body))
			pr.Out.ContentLength = int64(len(f.body))
			pr.Out.Header.Set("Content-Length", strconv.Itoa(len(f.body)))
		},
		Transport:     g.cfg.Transport,
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			mb := &meteredBody{rc: resp.Body, m: newMeter(f.rt, resp.Header.Get("Content-Type"))}
			f.onResponse(resp.StatusCode, mb)
			resp.Body = mb
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			f.onFailure(err)
			(&refusal{status: http.StatusBadGateway, outcome: "failed", retry: 2e9,
				text: fmt.Sprintf("the provider could not be reached: %v", err)}).write(w, f.rt.kind)
		},
		ErrorLog: nil,
	}
	rp.ServeHTTP(w, r)
}
