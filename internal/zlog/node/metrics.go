package node

import "github.com/prometheus/client_golang/prometheus"

type svcMetrics struct {
	nextCalls, positions, leases, leasesExpired, leaseFills prometheus.Counter
	hosting                                                 prometheus.Gauge
	recoveries                                              prometheus.Counter
	recoverySeconds                                         prometheus.Histogram
	settleCopies, settleFills                               prometheus.Counter
	reports, deposed                                        prometheus.Counter
	repairs, repairedEntries, rehomed                       prometheus.Counter
	settleDropped                                           prometheus.Counter
	completed, diverged                                     prometheus.Counter
}

func newSvcMetrics() *svcMetrics {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: "terrace_log_" + name, Help: help})
	}
	return &svcMetrics{
		nextCalls:     c("sequencer_next_total", "Next calls answered by sequencers this node hosts."),
		positions:     c("sequencer_positions_total", "Positions handed out by sequencers this node hosts."),
		leases:        c("sequencer_leases_total", "Position leases granted (leased batching)."),
		leasesExpired: c("sequencer_leases_expired_total", "Leases not returned in time; their unused positions were filled by the host."),
		leaseFills:    c("sequencer_lease_fills_total", "Positions of expired leases the host filled."),
		hosting: prometheus.NewGauge(prometheus.GaugeOpts{Name: "terrace_log_sequencers_hosted",
			Help: "Log sequencers this node hosts."}),
		recoveries: c("recoveries_total", "Recoveries (epoch bump, seal, settle, new segment) run by this node."),
		recoverySeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "terrace_log_recovery_seconds",
			Help: "Time from the start of a recovery to the new layout installed.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}),
		settleCopies:    c("settle_copies_total", "Entries recovery copied to live replicas that lacked them."),
		settleFills:     c("settle_fills_total", "Positions recovery filled because no live replica held them."),
		reports:         c("reports_total", "Failure reports received from clients."),
		deposed:         c("hosts_deposed_total", "Unreachable sequencer hosts whose lease this node revoked."),
		repairs:         c("repairs_total", "Stale replicas brought back by repair."),
		repairedEntries: c("repaired_entries_total", "Entries copied by repair."),
		rehomed:         c("replicas_rehomed_total", "Replicas of closed segments on lost nodes moved to a live node's device (repair then copies them)."),
		settleDropped:   c("settle_dropped_total", "Replicas recovery closed out as stale instead of settling them: they disagreed with a fill, or held a write settle could not wait out."),
		completed:       c("read_repairs_total", "Partly replicated entries a fill completed instead of filling."),
		diverged:        c("replicas_diverged_total", "Backups found holding another entry than their primary (should stay 0)."),
	}
}

func (m *svcMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.nextCalls, m.positions, m.leases, m.leasesExpired, m.leaseFills, m.hosting, m.recoveries,
		m.recoverySeconds, m.settleCopies, m.settleFills, m.reports, m.deposed, m.repairs, m.repairedEntries, m.rehomed, m.settleDropped, m.completed, m.diverged}
}
