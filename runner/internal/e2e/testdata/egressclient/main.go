// Command egressclient is an agent's program in the egress tests: Go's
// net/http client as any program uses it, taking HTTPS_PROXY, HTTP_PROXY
// and NO_PROXY from its environment and its CA roots from SSL_CERT_FILE.
//
//	egressclient get URL      → "status 200 body hello" or "error proxy=403 egress=held hold=… err=…"
//	egressclient stream URL   → reads the body until it ends: "ended after 1.2s: <err>"
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Println("usage: egressclient get|stream URL")
		os.Exit(2)
	}
	var mu sync.Mutex
	var proxyStatus, egress, hold string
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.OnProxyConnectResponse = func(_ context.Context, _ *url.URL, _ *http.Request, r *http.Response) error {
		mu.Lock()
		defer mu.Unlock()
		proxyStatus, egress, hold = fmt.Sprint(r.StatusCode), r.Header.Get("X-Clawguard-Egress"), r.Header.Get("X-Clawguard-Hold")
		return nil
	}
	client := &http.Client{Transport: tr, Timeout: 60 * time.Second}
	if os.Args[1] == "stream" {
		client.Timeout = 0
	}
	start := time.Now()
	resp, err := client.Get(os.Args[2])
	if err != nil {
		mu.Lock()
		fmt.Printf("error proxy=%s egress=%s hold=%s err=%v\n", proxyStatus, egress, hold, err)
		mu.Unlock()
		os.Exit(1)
	}
	defer resp.Body.Close()
	if os.Args[1] == "stream" {
		fmt.Println("streaming")
		_, err := io.Copy(io.Discard, resp.Body)
		fmt.Printf("ended after %s: %v\n", time.Since(start).Round(time.Millisecond), err)
		return
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	fmt.Printf("status %d body %s\n", resp.StatusCode, strings.TrimSpace(string(b)))
}
