// Package actuate is the only code that changes where data lives (Mirador
// §3.4). Recovery, tiering down and up, disk balancing, drains, planned
// moves from the planner, compaction (GC), seals and data removal all
// arrive here as Tasks and are executed the same way:
//
//	copy (on the destination node, from a source replica) → verify →
//	compare-and-swap switch of the egroup record → delete the source
//
// so durability never dips during a move (docs/design/0000 invariant 4) and
// a task computed from a record that has changed since is dropped as
// stale, never forced (invariant 3).
//
// # What it owns
//
//   - Executing tasks (Actuator.Execute) through the object layer's typed
//     maintenance calls; the copies themselves run where the data goes
//     (replica Pull: the destination node reads the source node).
//   - The global scheduler (Scheduler): at most K concurrent moves per
//     source device, per destination device and per node-to-node link,
//     and one adaptive byte rate — additive increase while client latency
//     and device queues are fine, multiplicative decrease when they are
//     not — so background moves do not hurt clients.
//   - Jobs: a list of tasks with progress, checkpointed in the metadata
//     store (JobStore) so that a job outlives the scan or plan that made
//     it and a new Curator master resumes it after a failover (Runner).
//     Checkpoints are fenced on the job header's revision: once a new
//     master has claimed a job, the old one can no longer write it
//     (ErrJobTakenOver) and stops running it.
//
// # What it must not do
//
// No decisions: what to move comes from curator/decide and plan; this
// package only carries it out, in order, within limits. No direct replica
// or metadata-record I/O: it uses object.Layer's maintenance API (which
// owns egroup and extent records) and its own job keys (j/a/) in the
// metadata store.
package actuate
