// Package checker decides whether a recorded chaos history (package
// history) is one a correct object store could have produced.
//
// # What it checks
//
//   - Corrupt reads: every successful GET must return the exact bytes
//     (size, SHA-256 and ETag) of some write to that key. Anything else —
//     flipped bytes, a truncated body, another key's data — is corrupt.
//   - Lost writes and resurrections, from the final reads taken after every
//     fault was healed: the value read last must be that of a write or
//     delete not superseded by an acknowledged operation that began after
//     it ended. An acknowledged write that is neither readable nor
//     superseded is lost; a deleted object that comes back is resurrected.
//     A key whose final reads all fail while it holds an acknowledged write
//     is lost too (unreadable); any other key whose final reads all fail is
//     an anomaly — a healed store answers every read, with the object or
//     with "no such key".
//   - Linearizability, per key: the key's writes, deletes and reads must be
//     explainable by a single register changing atomically at one instant
//     within each operation's interval (Herlihy and Wing). Operations with
//     an unknown outcome may take effect at any instant after their
//     invocation, or never. The search is github.com/anishathalye/porcupine.
//   - Listings: sorted, unique, within the prefix; every entry the size and
//     ETag of a write to its key (no phantoms); every key that certainly
//     existed throughout the listing (acknowledged before it began, no
//     delete before it ended) present.
//
// # What it must not do
//
// It performs no I/O except [Report.Visualize], which writes porcupine's
// HTML rendering of a failing key for a human; it takes the history as
// given and never talks to a cluster.
//
// # Dependencies and why
//
//   - github.com/anishathalye/porcupine (MIT, v1.3): the linearizability
//     checker used by MIT 6.5840 and many Raft and KV test suites; an exact
//     search (Wing & Gong with Lowe's memoisation) that partitions by key
//     and renders counterexamples. Writing our own would be a second,
//     less-tested implementation of a subtle algorithm.
package checker
