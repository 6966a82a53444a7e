// Package replica is the replica I/O seam: the operations on one egroup
// replica file (create, append, sync, truncate, verified and raw reads,
// verify, remove, and pull — copy a replica to where it goes) that the
// object layer's write and read paths and the actuator's moves are built
// from, and Local, their implementation over this node's devices.
//
// # What it owns
//
//   - The IO interface and its sentinel errors (ErrCorrupt, ErrFull,
//     ErrNotExist, ErrFailed, ErrAppendOnly), so that callers — the object
//     layer, the cluster's RPC router, the actuator — need neither the
//     extent store nor the device package.
//   - Local: replicas on this node's devices (extent.Store per device).
//   - Copy: the copy-then-verify of a replica from a source to a
//     destination, used by Pull wherever the destination lives.
//
// # What it must not do
//
// No metadata: it never reads or writes egroup records, so it cannot make
// a copy visible or delete a replica that metadata still points at; the
// object layer and the actuator order those steps (docs/design/0000
// invariants 2 and 4). No placement decisions and no network: the cluster
// package implements IO across nodes on top of Local.
//
// Data flows object → replica → extent → device; the cluster package
// imports replica (never object).
package replica
