// Package transform holds the byte-level codecs of the Curator's data
// transformations (docs/design/0010-curator-transforms.md): compression of
// cold extents with zstd, and erasure coding of cold egroups with
// Reed-Solomon. Its functions are pure transformations of byte
// slices with explicit size limits; the object layer decides where the
// results are stored and records them in metadata.
//
// # What it owns
//
//   - Compress and Decompress: one zstd frame per extent, decoded only up
//     to the extent's recorded length (a corrupt or hostile frame cannot
//     make a read allocate more), and Sum, the CRC32C a read checks the
//     decompressed bytes against.
//   - Pays, the "does it pay" test used for the incompressible memory.
//   - Encode, Reconstruct and VerifyParity: an egroup's layout cut into K
//     data and M parity strips, any K of which give it back.
//
// # What it must not do
//
// No I/O, no metadata, no goroutines of its own: it never touches replica
// files or records, so it cannot make metadata point at anything.
//
// # Dependencies
//
// github.com/klauspost/compress/zstd: a pure-Go zstd (no cgo), already in
// the module graph through other dependencies, with stateless
// EncodeAll/DecodeAll safe for concurrent use and a decoder memory limit.
// github.com/klauspost/reedsolomon: a maintained pure-Go Reed-Solomon
// coder (SIMD where available) used by MinIO and others; writing our own
// Galois-field arithmetic would be the riskier choice.
package transform
