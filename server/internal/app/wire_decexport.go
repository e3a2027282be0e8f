package app

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/clawguard/clawguard/server/internal/decexport"
)

// Decision export: with --decision-export-url, every replica runs the
// shipper; the watermark row's lock lets one post at a time.
func wireDecisionExport(d *Parts, s *services) error {
	c := d.Config
	if c.DecisionExportURL == "" {
		return nil
	}
	sh := &decexport.Shipper{Pool: d.Store.Pool, Log: d.Log, URL: c.DecisionExportURL,
		Observe: func(lag time.Duration, shipped int, err error) {
			m := d.Metrics
			switch {
			case err != nil:
				m.ExportBatchesTotal.WithLabelValues("failed").Inc()
			case shipped > 0:
				m.ExportBatchesTotal.WithLabelValues("shipped").Inc()
				m.ExportDecisionsTotal.Add(float64(shipped))
			}
			m.ExportLagSeconds.Set(lag.Seconds())
		}}
	if c.DecisionExportSecretFile != "" {
		b, err := readSecret(c.DecisionExportSecretFile)
		if err != nil {
			return err
		}
		sh.Secret = b
	}
	if c.DecisionExportTokenFile != "" {
		b, err := readSecret(c.DecisionExportTokenFile)
		if err != nil {
			return err
		}
		sh.Token = string(b)
	}
	s.background = append(s.background, sh.Run)
	return nil
}

// readSecret reads a non-empty secret file, trimmed.
func readSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	b = []byte(strings.TrimSpace(string(b)))
	if len(b) == 0 {
		return nil, fmt.Errorf("secret file %s is empty", path)
	}
	return b, nil
}
