package server

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/terrace-storage/terrace/internal/curator"
)

// mapWorkMetrics shows the scan work a node does for the Curator master:
// the partitions it is mapping (and reducing, in a shuffled full scan)
// right now, how many it finished, and how many shuffles it holds as a
// reducer. The master's job record says who did what after the scan;
// these say it while the scan runs, on the node doing it.
type mapWorkMetrics struct {
	active   atomic.Int64
	finished *prometheus.CounterVec
	shuffles *curator.ShuffleStore
}

func newMapWorkMetrics(shuffles *curator.ShuffleStore) *mapWorkMetrics {
	return &mapWorkMetrics{
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "terrace", Subsystem: "curator",
			Name: "map_partitions_total",
			Help: "Scan partitions this node mapped (or reduced) for the Curator master, by outcome (ok, error)."}, []string{"outcome"}),
		shuffles: shuffles,
	}
}

func (m *mapWorkMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		m.finished,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "terrace", Subsystem: "curator",
			Name: "map_partitions_active",
			Help: "Scan partitions this node is mapping (or reducing) for the Curator master now."},
			func() float64 { return float64(m.active.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "terrace", Subsystem: "curator",
			Name: "shuffles_held",
			Help: "Shuffles whose references this node holds as a reducer (until the reduce takes them, or they expire)."},
			func() float64 { return float64(m.shuffles.Shuffles()) }),
	}
}

// start counts a partition in progress; the returned func ends it with
// its outcome. A nil receiver (a node without the Curator's policy
// hooks) counts nothing.
func (m *mapWorkMetrics) start() func(error) {
	if m == nil {
		return func(error) {}
	}
	m.active.Add(1)
	return func(err error) {
		m.active.Add(-1)
		outcome := "ok"
		if err != nil {
			outcome = "error"
		}
		m.finished.WithLabelValues(outcome).Inc()
	}
}
