// Package curator is Terrace's background self-management (Curator,
// NSDI'17): MapReduce-style scans over the metadata maps that find what is
// wrong or wasteful, and the executor that fixes it without an operator.
//
// A job scans maps in key-range partitions in parallel (map), groups the
// emitted records by egroup and extent (shuffle), and hands the joined view
// to the pure deciders in package decide (reduce), which return tasks.
// Tasks run from per-node queues, recovery first, under the actuator's
// scheduler: bounded moves per device and link and a byte rate that backs
// off while devices are busy or clients slow. Every task carries the
// metadata version it was computed from and applies with compare-and-swap;
// a stale task is dropped and counted, never forced.
//
// Jobs run on one node at a time: in a cluster the Curator master is
// elected through an etcd lease (the Leader interface); on a single node
// the node is always master. Schedules are event-driven (device failure,
// node down past the stabilisation interval → recovery scan now) and
// periodic (partial scans every PartialEvery, full scans every FullEvery).
//
// The package decides; it never moves data itself. Every task goes to
// package actuate (the only code that moves data: copy on the destination
// node, verify, compare-and-swap switch, delete the source), which runs it
// as a job checkpointed in the metadata store so that a new master resumes
// it after a failover. The Curator reads the maps from the metadata store
// it is given and writes only its own records there (job history, the
// learned tiering model, the owner maps' cut points); it imports neither
// the replica I/O nor the extent or device packages, and never holds locks
// against foreground I/O.
//
// In a cluster a full scan shuffles (shuffle.go, scanshuffle.go): the
// owner maps send their references to the nodes reducing the extent
// partitions, those send the joined extents to the nodes reducing the
// egroup partitions, and the master receives per egroup aggregates and
// only the extents it acts on; any failure re-runs the scan with the
// joins on the master.
//
// A full scan's extent-side arrays spill to memory-mapped files past a
// heap budget (spill.go, with golang.org/x/sys/unix for fallocate and
// mmap, the module the device package already uses for syncfs).
package curator
