package policy

import (
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	m           *Manager
	version     *prometheus.Desc
	running     *prometheus.Desc
	disabled    *prometheus.Desc
	swaps       *prometheus.CounterVec
	swapDelay   prometheus.Histogram
	errors      *prometheus.CounterVec
	fallbacks   *prometheus.CounterVec
	callSeconds *prometheus.HistogramVec
}

func newMetrics(m *Manager) *metrics {
	l := []string{"hook", "policy"}
	return &metrics{m: m,
		version:  prometheus.NewDesc("terrace_policy_version", "Newest version of the policy installed on this node.", l, nil),
		running:  prometheus.NewDesc("terrace_policy_running_version", "Version the hook's decisions use now (0: the built-in default, after failures).", l, nil),
		disabled: prometheus.NewDesc("terrace_policy_disabled", "1 when the newest version is disabled on this node after repeated failures.", l, nil),
		swaps: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "terrace_policy_swaps_total",
			Help: "Policy versions made live on this node."}, []string{"hook"}),
		swapDelay: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "terrace_policy_swap_delay_seconds",
			Help:    "From a version's commit (proposer's clock) to it going live here.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "terrace_policy_errors_total",
			Help: "Failed policy calls by kind (runtime, budget, deadline, type, missing)."}, []string{"hook", "policy", "kind"}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "terrace_policy_fallbacks_total",
			Help: "Decisions made by the last good version or the built-in default because a policy failed."}, []string{"hook", "to"}),
		callSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "terrace_policy_call_seconds",
			Help:    "Duration of one hook invocation (one sandbox session).",
			Buckets: prometheus.ExponentialBuckets(0.00002, 2, 16)}, []string{"hook"}),
	}
}

// Collectors returns the manager's Prometheus collectors.
func (m *Manager) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.m, m.m.swaps, m.m.swapDelay, m.m.errors, m.m.fallbacks, m.m.callSeconds}
}

// Describe implements prometheus.Collector for the per-policy gauges.
func (x *metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- x.version
	ch <- x.running
	ch <- x.disabled
}

// Collect implements prometheus.Collector.
func (x *metrics) Collect(ch chan<- prometheus.Metric) {
	for _, st := range x.m.Status() {
		lv := []string{string(st.Hook), st.Name}
		ch <- prometheus.MustNewConstMetric(x.version, prometheus.GaugeValue, float64(st.Version), lv...)
		ch <- prometheus.MustNewConstMetric(x.running, prometheus.GaugeValue, float64(st.Running), lv...)
		d := 0.0
		if st.Disabled {
			d = 1
		}
		ch <- prometheus.MustNewConstMetric(x.disabled, prometheus.GaugeValue, d, lv...)
	}
}
