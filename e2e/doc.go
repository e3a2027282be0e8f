// Package e2e holds the end-to-end tests of Clawguard as it is deployed: the
// real binaries (clawguard-server, clawguard-runner, ncl, the demo agent)
// built from this tree, run as separate processes over a real Postgres.
//
//   - TestLiveScrapeExportsDeployMetrics: a server and a runner, scraped over
//     HTTP; every metric deploy/ (rules, alerts, dashboards) names must be
//     exported by one of them.
//   - TestMultiHost: two runners on two network namespaces (two hosts), two
//     server replicas, one Postgres; a held agent-to-agent message approved
//     on the other replica, delivered on the other host, and a replica killed
//     mid-run.
//
// Run with `go test ./e2e/...` from the workspace root (or `make test`).
// TestMultiHost needs root (network namespaces) and fails without it when
// CI=true.
package e2e
