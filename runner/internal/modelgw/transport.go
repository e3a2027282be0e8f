package modelgw

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"time"
)

// ProviderTransport is how the gateway reaches providers: the system's CA
// roots plus, when caFile names one, a bundle of the operator's (a
// provider behind a private CA; the tests' fake provider). No proxy from
// the environment: the runner's own egress is not the agents'.
func ProviderTransport(caFile string) (*http.Transport, error) {
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("model providers' CA bundle: %w", err)
		}
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("model providers' CA bundle %s holds no PEM certificate", caFile)
		}
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	t.MaxIdleConnsPerHost = 64
	t.IdleConnTimeout = 90 * time.Second
	t.ResponseHeaderTimeout = 10 * time.Minute
	return t, nil
}
