// Package meta owns Terrace's metadata: an ordered, transactional key-value
// interface (KV) and the typed maps on top of it (buckets, objects, extents,
// extent groups, egroup access, cluster, policies, jobs).
//
// KV is deliberately the subset that etcd v3 offers: point reads, range
// scans, multi-key transactions guarded by per-key modification revisions
// (compare-and-swap), and watches. The embedded default is Pebble; the
// cluster adds an etcd backend behind the same interface.
//
// The package guarantees that a committed Txn is durable (fsynced) before
// Txn returns, and that concurrent Txns are group-committed: compares and
// applies are serialised, WAL syncs are shared.
//
// It must not know about devices, files or the object layer's data: it
// stores records, it never touches egroup bytes.
//
// Records are JSON. They are decoded with github.com/go-json-experiment/json
// under its v1 options — the implementation Go's encoding/json itself runs
// on under GOEXPERIMENT=jsonv2, already in the module graph through the
// console tests' chromedp — because decoding is most of a Curator scan's map work and
// it is about 1.5× faster with a third of the allocations, with results
// held to encoding/json's by a fuzz test (FuzzDecodeMatchesStd).
package meta
