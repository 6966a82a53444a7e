package meta

// KVStats counts the work a KV has done since it opened, for metrics and
// benchmarks: a regression that adds a metadata read or transaction to
// every PUT shows up as a number per operation (terrace bench s3 with
// metrics=…).
type KVStats struct {
	// Reads are Get and Scan calls.
	Reads int64
	// Commits are Commit calls (transactions requested).
	Commits int64
	// BackendTxns are transactions the store actually executed: on etcd
	// fewer than Commits when group commit merged concurrent ones, on
	// Pebble one batch per Commit (WAL syncs are shared, not counted).
	BackendTxns int64
	// LocalReadFallbacks are reads that this node's own etcd member
	// failed and the network client answered (always 0 on Pebble).
	LocalReadFallbacks int64
	// LocalWriteFallbacks are transactions this node's own etcd member
	// refused before proposing them (no leader, overloaded) and the
	// network client sent instead (always 0 on Pebble).
	LocalWriteFallbacks int64
}

// StatsReporter is a KV that counts its work.
type StatsReporter interface {
	KVStats() KVStats
}
