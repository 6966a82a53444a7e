package store

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	records      *prometheus.CounterVec
	bytes        prometheus.Counter
	reads        prometheus.Counter
	syncs        prometheus.Counter
	batchBytes   prometheus.Histogram
	writeErrors  prometheus.Counter
	corrupt      prometheus.Counter
	conflicts    prometheus.Counter
	filesRemoved prometheus.Counter
}

func newMetrics() *metrics {
	return &metrics{
		records: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "terrace_log_store_records_total",
			Help: "Shared-log journal records written, by kind (data, fill, trim)."}, []string{"kind"}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "terrace_log_store_data_bytes_total",
			Help: "Shared-log entry bytes written to this node's journals."}),
		reads: prometheus.NewCounter(prometheus.CounterOpts{Name: "terrace_log_store_reads_total",
			Help: "Shared-log entries read from this node's journals."}),
		syncs: prometheus.NewCounter(prometheus.CounterOpts{Name: "terrace_log_store_syncs_total",
			Help: "Journal group commits (one write and one fsync each)."}),
		batchBytes: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "terrace_log_store_commit_bytes",
			Help: "Bytes per journal group commit.", Buckets: prometheus.ExponentialBuckets(64, 4, 10)}),
		writeErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "terrace_log_store_write_errors_total",
			Help: "Journal writes that failed (the device is out of service for the log)."}),
		corrupt: prometheus.NewCounter(prometheus.CounterOpts{Name: "terrace_log_store_corrupt_records_total",
			Help: "Journal records that failed their checksum on read or replay."}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{Name: "terrace_log_store_replay_conflicts_total",
			Help: "Replayed records that would have given a position a second entry (ignored; should stay 0)."}),
		filesRemoved: prometheus.NewCounter(prometheus.CounterOpts{Name: "terrace_log_store_files_removed_total",
			Help: "Journal files removed because nothing in them was live (space reclaimed)."}),
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.records, m.bytes, m.reads, m.syncs, m.batchBytes, m.writeErrors, m.corrupt, m.conflicts, m.filesRemoved}
}
