// Package metarange is one range of Terrace metadata replicated by raft
// over Pebble: the prototype that docs/design/0013 (option B) asks for
// before any metadata leaves etcd. It answers one question with a number:
// what does a small PUT's metadata commit cost when the raft log and the
// state machine share one Pebble instance per member, against the same
// commit through etcd (bbolt, the MVCC index, the v3 apply)?
//
// A Range is a meta.KV: Commit applies a meta.Txn (compares on per-key
// revisions, puts, deletes) atomically on every member, in raft log order,
// and returns the raft index of its entry as the revision; Get and Scan are
// linearizable (a ReadIndex round, then a read of the local Pebble);
// GetStale reads the local copy; Watch streams applied changes.
//
// How one member works (see range.go):
//   - raft (go.etcd.io/raft/v3, the library etcd runs on) decides the log;
//   - each Ready's entries and hard state go into the member's Pebble with
//     one synced batch, so concurrent proposals share one fsync;
//   - committed entries are applied to the same Pebble in one unsynced
//     batch with the applied index: after a crash the synced log replays
//     whatever the lost apply batch held;
//   - a leader sends its appends before its own fsync (raft thesis
//     §10.2.1), as etcd does; a follower answers only after its fsync.
//
// What it does not do yet, and what option B needs before it could hold
// production metadata: log truncation and snapshots (the log is kept
// whole, in Pebble and in memory, so a member that was down catches up
// from the log), membership changes after bootstrap, splits and merges of
// ranges, leaseholder reads without a ReadIndex round, TLS on the raft
// transport. Nothing in the server uses this package; the benchmark in
// bench_test.go and docs/perf.md ("A raft range over Pebble against
// etcd") are its reason to exist.
//
// Dependencies: go.etcd.io/raft/v3 and Pebble are already Terrace's (etcd
// runs the same raft; the single-node store is Pebble), and
// google.golang.org/protobuf encodes raft's messages.
package metarange
