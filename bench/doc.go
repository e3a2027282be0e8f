// Package bench holds the load generators (see BENCHMARKS.md).
package bench
