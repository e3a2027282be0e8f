// Command listnames prints, one per line, the name and type of every metric family the
// runner exports once its metrics are built and pre-initialised. deploy/'s
// tests run it to check that every metric a rule, alert or dashboard names
// really exists (deploy cannot import an internal package, but it can run one).
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/clawguard/clawguard/runner/internal/metrics"
)

func main() {
	reg := metrics.NewRegistry()
	metrics.NewMetrics(reg).PreInit([]string{"send_message"})
	mfs, err := reg.Gather()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gather:", err)
		os.Exit(1)
	}
	for _, mf := range mfs {
		fmt.Println(mf.GetName(), strings.ToLower(mf.GetType().String()))
	}
}
