package bridge

import (
	"strings"
	"testing"
	"time"
)

// A client certificate goes with its key, and only over TLS.
func TestValidateRefusesAClientCertificateWithoutTLS(t *testing.T) {
	base := Config{Server: "127.0.0.1:7443", DataDir: t.TempDir(), RetryMax: time.Second, LogLevel: "info"}
	for name, c := range map[string]struct {
		tweak func(*Config)
		want  string
	}{
		"a certificate without its key": {func(c *Config) { c.TLSCA, c.TLSCert = "ca.pem", "c.pem" }, "go together"},
		"a key without its certificate": {func(c *Config) { c.TLSCA, c.TLSKey = "ca.pem", "c.key" }, "go together"},
		"a certificate on plaintext":    {func(c *Config) { c.TLSCert, c.TLSKey = "c.pem", "c.key" }, "needs --tls-ca"},
	} {
		cfg := base
		c.tweak(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
	ok := base
	ok.TLSCA, ok.TLSCert, ok.TLSKey = "ca.pem", "c.pem", "c.key"
	if err := ok.Validate(); err != nil {
		t.Errorf("CA, certificate and key: %v", err)
	}
}
