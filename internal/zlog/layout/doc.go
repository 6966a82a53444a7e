// Package layout is the shared log's decision code: the log record, the
// layout (which replicas hold which positions in which epoch), mapping a
// position to its stripe replicas, the settle plan that makes the replicas
// of a sealed segment agree, the layout recovery installs, and the choice
// of the node that hosts a log's sequencer.
//
// A layout is a list of segments. Segment i holds positions [Start, End)
// (the last, active segment is open-ended); position p lives in stripe
// p mod W, and a stripe is an ordered list of replicas: the first is the
// primary, which decides write-once and forwards to the others. A segment
// is written in exactly one epoch: recovery seals the active segment,
// settles it (every live replica ends up with the same entries and no
// holes), closes it at the new tail K and opens a new segment at K on
// freshly placed replicas. So stale clients can only ever reach sealed
// replicas, and the layout only grows at its end.
//
// The package is pure: it imports only the standard library, performs no
// I/O, starts no goroutines and never reads the clock. Same inputs, same
// outputs; testdata/ specifies it.
package layout
