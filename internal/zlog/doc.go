// Package zlog is Terrace's shared log: CORFU (NSDI'12) as ZLog maps it onto
// a storage system (Malacology §5.2). A log is a sequence of positions; a
// sequencer hands positions out from an in-memory counter, clients write
// entries straight to write-once storage, and epochs make the sequencer's
// failure safe. docs/log.md explains the protocol and the API;
// docs/design/0004-shared-log.md why it is built this way.
//
// Subpackages, from the bottom up:
//
//   - layout: pure decision code. The log's record and layout (segments of
//     positions striped over replica sets), position mapping, recovery's
//     settle plan and new layout, and the choice of the sequencer's host.
//     No I/O, clocks or goroutines.
//   - store: one node's stripe replicas: a group-committed journal per
//     device, an in-memory index, write-once / fill / trim / seal, restart
//     recovery and space reclamation.
//   - zlogpb: the gRPC protocol.
//   - node: the service a Terrace node runs: storage RPCs (the primary of
//     a stripe decides write-once and forwards to the backups), the
//     sequencer host (etcd lease, recovery by epoch bump + seal + settle),
//     the metadata cache and the admin API.
//   - client: the Go client (Append, Read, Tail, Fill, Trim, Subscribe).
//   - checker: a model-based checker of client histories (porcupine).
//   - logbench: `terrace bench log`.
//
// The shared log must not touch the object layer's records or files: it
// uses the same devices (its own files under lg/), the same placement
// policy and the same metadata store (keys under l/), nothing else.
package zlog
