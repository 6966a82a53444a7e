// Package nemesis plans the faults of a chaos run: a pure function of the
// cluster's shape, the options and a seed returns the schedule — which
// fault, on what, when and for how long. The same seed gives the same
// schedule, so a failing run replays.
//
// # What it owns
//
//   - The fault vocabulary ([Kind]): kill -9 with restart (of a named node,
//     the etcd leader or the Curator master), SIGSTOP pauses, isolating a
//     node, partitioning the cluster in two, slow and lossy links, device
//     EIO, a full device, a slow device, and bit rot in egroup files.
//   - The safety envelope every schedule keeps, so that the cluster can
//     make progress and no fault combination destroys data by itself:
//     at most one etcd member down, paused, isolated or on the minority
//     side of a partition at a time; at most MaxImpairedNodes nodes impaired
//     at once (with vector any=3, one replica of every egroup stays
//     reachable); each impairment counted until its node has had time to
//     come back (RecoverTime); one link or device fault per node at a time.
//     [Check] verifies a schedule against it; the tests run it on every
//     schedule they make.
//
// # What it must not do
//
// No I/O, clocks, goroutines or globals: it returns events with offsets
// from the start of the fault phase, and the chaos runner carries them
// out. Targets known only at run time (the etcd leader, the Curator
// master, which egroup file to corrupt) are left as roles and picks the
// runner resolves, and the schedule is planned as if they could be any
// node.
package nemesis
