package object

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	puts, gets, deletes  prometheus.Counter
	putBytes, readBytes  prometheus.Counter
	corruptReads         prometheus.Counter
	replicaWriteFailures prometheus.Counter
	egroupsCreated       prometheus.Counter
	fallbackEgroups      prometheus.Counter
	guardRetries         prometheus.Counter
	// appendBatch counts the writes in each batch of small appends.
	appendBatch prometheus.Histogram
	// Curator transforms (transform.go).
	decompressed     prometheus.Counter
	transformLogical *prometheus.CounterVec
	transformStored  *prometheus.CounterVec
	degradedReads    prometheus.Counter
	stripsRebuilt    prometheus.Counter
	// The orphan sweep (orphans.go): files and bytes it removed, and
	// removed files whose egroup listed them by then (marked bad).
	orphanFiles, orphanBytes, orphanRaces prometheus.Counter
	// putStage times the two halves of a PUT: the data (appends to every
	// replica, the last one with its fsync) and the metadata commit, so
	// an operator sees which one a slow PUT waits on.
	putStage *prometheus.HistogramVec
	// putData and putCommit are its two series, resolved once (every PUT
	// observes both).
	putData, putCommit prometheus.Observer
}

func newMetrics() *metrics {
	m := buildMetrics()
	m.putData, m.putCommit = m.putStage.WithLabelValues("data"), m.putStage.WithLabelValues("commit")
	return m
}

func buildMetrics() *metrics {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "terrace", Subsystem: "object", Name: name, Help: help})
	}
	return &metrics{
		puts:                 c("puts_total", "Objects and parts written."),
		gets:                 c("gets_total", "Object reads opened."),
		deletes:              c("deletes_total", "Objects deleted."),
		putBytes:             c("put_bytes_total", "Payload bytes written (before replication)."),
		readBytes:            c("read_bytes_total", "Payload bytes read from replicas."),
		corruptReads:         c("corrupt_replica_reads_total", "Replica reads that failed checksum verification."),
		replicaWriteFailures: c("replica_write_failures_total", "Replica appends that failed and were re-placed."),
		egroupsCreated:       c("egroups_created_total", "Extent groups created."),
		fallbackEgroups:      c("fallback_egroups_total", "Extent groups placed on a slower tier than their vector prefers because it was full; they retire early."),
		guardRetries:         c("bucket_guard_retries_total", "Object commits repeated because a bucket deletion was attempted (and refused) during the write."),
		appendBatch: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "terrace", Subsystem: "object", Name: "append_batch_writes",
			Help:    "Small PUTs per shared egroup append (one fsync and one replica call per batch; docs/design/0012).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64}}),
		decompressed: c("decompressed_bytes_total", "Bytes decompressed by reads of compressed extents."),
		transformLogical: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "terrace", Subsystem: "object", Name: "transform_logical_bytes_total",
			Help: "Payload bytes rewritten by Curator transforms, by transform (before)."}, []string{"transform"}),
		transformStored: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "terrace", Subsystem: "object", Name: "transform_stored_bytes_total",
			Help: "Bytes stored by Curator transforms, by transform (after)."}, []string{"transform"}),
		degradedReads: c("ec_degraded_reads_total", "Reads of erasure-coded data that reconstructed missing or bad strips."),
		stripsRebuilt: c("ec_strips_rebuilt_total", "Strips of erasure-coded egroups rebuilt onto new devices."),
		orphanFiles:   c("orphan_files_removed_total", "Replica files the periodic orphan sweep removed: no egroup record listed them on their device."),
		orphanBytes:   c("orphan_bytes_removed_total", "Bytes of the replica files the periodic orphan sweep removed."),
		orphanRaces: c("orphan_sweep_races_total",
			"Replica files the orphan sweep removed whose egroup listed them by the time of the removal; each is marked bad and the Curator repairs it (expected 0)."),
		putStage: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "terrace", Subsystem: "object", Name: "put_stage_seconds",
			Help:    "Time an object PUT spends per stage: data (replica appends and their fsync) and commit (the metadata transaction).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}, []string{"stage"}),
	}
}

// Collectors returns the layer's Prometheus collectors for registration.
func (l *Layer) Collectors() []prometheus.Collector {
	m := l.m
	return []prometheus.Collector{m.puts, m.gets, m.deletes, m.putBytes, m.readBytes, m.corruptReads, m.replicaWriteFailures, m.egroupsCreated, m.fallbackEgroups, m.guardRetries, m.appendBatch,
		m.decompressed, m.transformLogical, m.transformStored, m.degradedReads, m.stripsRebuilt, m.putStage,
		m.orphanFiles, m.orphanBytes, m.orphanRaces}
}
