// Package store holds one node's stripe replicas of shared logs: the
// storage unit of CORFU. A replica (a stripe of a segment of a log, on one
// device) maps positions to entries and offers write-once (Begin then
// Pending.Write), fill, trim, read, seal (install an epoch and report every
// position held), dump and reset (for repair).
//
// Every device that holds replicas has one journal: append-only files
// lg/XXXXXXXX.jnl of checksummed records (data, fill, trim, seal, reset).
// A writer goroutine per device group-commits: every record queued while an
// fsync runs goes out in the next write + fsync, so an acknowledged write
// is on the medium whatever the number of concurrent writers. The index is
// in memory (about 50 bytes per entry) and rebuilt from the journal at
// start; a journal file is removed once nothing in it is live (entries
// trimmed, below the log's trim point, or of a dropped segment).
//
// The store decides nothing about the protocol beyond one replica: which
// replica is primary, forwarding, epochs of layouts and recovery belong to
// package node. It writes only its own files under lg/ on the devices it
// is given and never touches the object layer's egroup files or metadata.
package store
