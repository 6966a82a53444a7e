package object

import "github.com/terrace-storage/terrace/internal/meta"

// The records the object layer hands its callers. Callers above the layer
// (the S3 gateway) read and change objects and buckets only through the
// layer's API, so they name these types here rather than importing the
// metadata package: the layer owns the records and their keys.
type (
	// Record is an object version's record: size, ETag, times, headers,
	// user metadata, tags, vector and class, and its extents.
	Record = meta.Object
	// BucketRecord is a bucket's record: owner, vector, S3 attributes,
	// versioning state, snapshots and parent.
	BucketRecord = meta.Bucket
)

// ErrConflict is a compare-and-swap that lost to a concurrent change; the
// caller re-reads and decides again.
var ErrConflict = meta.ErrConflict
