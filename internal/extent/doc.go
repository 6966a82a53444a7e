// Package extent owns the on-device format of extent-group replicas: an
// append-only file of slices, each carrying a CRC32C (Castagnoli) checksum
// over its length and payload, and the crash recovery of those files.
//
// Layout. An extent of L payload bytes is written as ceil(L/SliceSize)
// consecutive slices; every slice but the last carries SliceSize bytes. A
// slice is an 8-byte header — payload length (uint32 LE) and CRC32C of the
// length bytes plus payload (uint32 LE) — followed by the payload. Because
// the layout of an extent is a pure function of its length, a reader can
// seek straight to the slices covering a byte range; it never trusts a
// length read from disk without checking it against the expected one.
//
// Guarantees. Every byte returned by a read has passed its slice checksum;
// a mismatch returns ErrCorrupt, never data. Recovery truncates a replica to
// the committed length recorded in metadata, so bytes of unacknowledged
// writes vanish, and reports a replica that is shorter than committed (a
// lost tail) as damaged.
//
// The package does not decide which egroup or replica to use, and never
// touches metadata: the object layer owns those decisions.
package extent
