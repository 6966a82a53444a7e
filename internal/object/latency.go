package object

import (
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// latencyTracker follows foreground (client) operation latency so that
// background work can tell when it is hurting clients (the actuator's
// adaptive rate slows down above twice the quiet baseline).
//
// recent is an exponentially weighted moving average over operations
// (weight 0.1) that relaxes to the baseline once clients go quiet (see
// getAt); baseline is the lowest per-minute average seen in the last ten
// minutes: the latency clients get when nothing else is going on.
type latencyTracker struct {
	mu      sync.Mutex
	recent  float64   // ns
	last    time.Time // the latest observation
	minutes [10]float64
	counts  [10]int
	slot    int64 // minute index of minutes[slot%10]

	// ops and total count every observed operation and sum their
	// latencies, so a sampler can take exact means over any interval.
	ops   int64
	total time.Duration

	histOnce sync.Once
	hist     prometheus.Histogram // every observation, for Prometheus
}

// histogram is the distribution of client operation latencies
// (terrace_object_client_op_seconds), created on first use so that a
// zero latencyTracker works.
func (t *latencyTracker) histogram() prometheus.Histogram {
	t.histOnce.Do(func() {
		t.hist = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "terrace", Subsystem: "object",
			Name: "client_op_seconds", Help: "Latency of client object writes and read opens (the foreground latency the Curator protects).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)})
	})
	return t.hist
}

func (t *latencyTracker) observe(now time.Time, d time.Duration) {
	t.histogram().Observe(d.Seconds())
	t.mu.Lock()
	defer t.mu.Unlock()
	ns := float64(d)
	t.recent = t.recentAt(now, t.baseline()) // an idle stretch has relaxed it
	if now.After(t.last) {
		t.last = now
	}
	t.ops++
	t.total += d
	if t.recent == 0 {
		t.recent = ns
	} else {
		t.recent += 0.1 * (ns - t.recent)
	}
	m := now.Unix() / 60
	if m != t.slot {
		for s := t.slot + 1; s <= m && s-t.slot <= 10; s++ {
			t.minutes[s%10], t.counts[s%10] = 0, 0
		}
		t.slot = m
	}
	i := m % 10
	t.counts[i]++
	t.minutes[i] += (ns - t.minutes[i]) / float64(t.counts[i])
}

func (t *latencyTracker) get() (recent, baseline time.Duration) { return t.getAt(time.Now()) }

// Idle decay of the recent average: an average over operations does not
// move when there are none, so the latency of the last slow operations
// before clients stopped (a node failure, a loaded machine) would read as
// "clients are hurting" for as long as none come, and background work
// would crawl at its minimum rate with nobody to protect. After
// idleDecayAfter without an operation, recent relaxes toward the baseline
// with time constant idleDecayTau.
const (
	idleDecayAfter = time.Second
	idleDecayTau   = 2 * time.Second
)

func (t *latencyTracker) getAt(now time.Time) (recent, baseline time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	base := t.baseline()
	return time.Duration(t.recentAt(now, base)), time.Duration(base)
}

// baseline is the lowest per-minute mean with at least 20 operations in
// the last ten minutes (0: none yet). t.mu is held.
func (t *latencyTracker) baseline() float64 {
	base := 0.0
	for i, c := range t.counts {
		if c >= 20 && (base == 0 || t.minutes[i] < base) {
			base = t.minutes[i]
		}
	}
	return base
}

// recentAt is the recent average as of now, relaxed toward base by the
// time since the last operation. t.mu is held.
func (t *latencyTracker) recentAt(now time.Time, base float64) float64 {
	r := t.recent
	if idle := now.Sub(t.last); base > 0 && !t.last.IsZero() && idle > idleDecayAfter {
		r = base + (r-base)*math.Exp(-float64(idle-idleDecayAfter)/float64(idleDecayTau))
	}
	return r
}

// ForegroundLatency returns the recent latency of client writes and read
// opens and its quiet baseline (0 until enough operations were seen).
func (l *Layer) ForegroundLatency() (recent, baseline time.Duration) { return l.lat.get() }

// LatencyCollector is the histogram of client operation latencies.
func (l *Layer) LatencyCollector() prometheus.Collector { return l.lat.histogram() }

// ClientLatencyTotals returns how many client writes and read opens were
// observed and their summed latency, since the layer started: the
// difference of two calls gives an interval's exact mean (the learned
// tiering scheduler's reward).
func (l *Layer) ClientLatencyTotals() (ops int64, total time.Duration) {
	l.lat.mu.Lock()
	defer l.lat.mu.Unlock()
	return l.lat.ops, l.lat.total
}
