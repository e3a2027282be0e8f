package metrics

import (
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// Pools exposes the replica's Postgres connection pools (the main pool and
// the decision log's own) from pgxpool's statistics, read at each scrape:
// a pool that runs dry shows as acquires that waited and time spent
// waiting, before it shows as latency.
type Pools struct {
	mu    sync.Mutex
	pools map[string]*pgxpool.Pool

	conns, maxConns                   *prometheus.Desc
	acquires, emptyAcquires, canceled *prometheus.Desc
	acquireSeconds                    *prometheus.Desc
}

// NewPools registers the pools' collector on reg; Add names each pool.
func NewPools(reg prometheus.Registerer) *Pools {
	p := &Pools{
		pools: map[string]*pgxpool.Pool{},
		conns: prometheus.NewDesc("clawguard_db_pool_connections",
			"Connections of a Postgres pool by state: acquired (in use), idle, constructing.", []string{"pool", "state"}, nil),
		maxConns: prometheus.NewDesc("clawguard_db_pool_max_connections",
			"The pool's maximum size.", []string{"pool"}, nil),
		acquires: prometheus.NewDesc("clawguard_db_pool_acquires_total",
			"Connections acquired from the pool.", []string{"pool"}, nil),
		emptyAcquires: prometheus.NewDesc("clawguard_db_pool_empty_acquires_total",
			"Acquires that found no idle connection and waited for one (or for a new one to be made).", []string{"pool"}, nil),
		canceled: prometheus.NewDesc("clawguard_db_pool_canceled_acquires_total",
			"Acquires abandoned because their context ended first.", []string{"pool"}, nil),
		acquireSeconds: prometheus.NewDesc("clawguard_db_pool_acquire_seconds_total",
			"Time spent acquiring connections, summed over every acquire.", []string{"pool"}, nil),
	}
	reg.MustRegister(p)
	return p
}

// Add reports pool under name ("main", "decision_log").
func (p *Pools) Add(name string, pool *pgxpool.Pool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pools[name] = pool
}

func (p *Pools) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{p.conns, p.maxConns, p.acquires, p.emptyAcquires, p.canceled, p.acquireSeconds} {
		ch <- d
	}
}

func (p *Pools) Collect(ch chan<- prometheus.Metric) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, pool := range p.pools {
		st := pool.Stat()
		ch <- prometheus.MustNewConstMetric(p.conns, prometheus.GaugeValue, float64(st.AcquiredConns()), name, "acquired")
		ch <- prometheus.MustNewConstMetric(p.conns, prometheus.GaugeValue, float64(st.IdleConns()), name, "idle")
		ch <- prometheus.MustNewConstMetric(p.conns, prometheus.GaugeValue, float64(st.ConstructingConns()), name, "constructing")
		ch <- prometheus.MustNewConstMetric(p.maxConns, prometheus.GaugeValue, float64(st.MaxConns()), name)
		ch <- prometheus.MustNewConstMetric(p.acquires, prometheus.CounterValue, float64(st.AcquireCount()), name)
		ch <- prometheus.MustNewConstMetric(p.emptyAcquires, prometheus.CounterValue, float64(st.EmptyAcquireCount()), name)
		ch <- prometheus.MustNewConstMetric(p.canceled, prometheus.CounterValue, float64(st.CanceledAcquireCount()), name)
		ch <- prometheus.MustNewConstMetric(p.acquireSeconds, prometheus.CounterValue, st.AcquireDuration().Seconds(), name)
	}
}
