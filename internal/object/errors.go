package object

import "errors"

// Errors the gateway maps to S3 error codes.
var (
	ErrNoSuchBucket   = errors.New("object: no such bucket")
	ErrBucketExists   = errors.New("object: bucket already exists")
	ErrBucketNotEmpty = errors.New("object: bucket not empty")
	// ErrBucketBusy: a bucket-level operation (a deletion) raced another
	// one on the same bucket; retry.
	ErrBucketBusy          = errors.New("object: bucket changed concurrently; retry")
	ErrInvalidBucketName   = errors.New("object: invalid bucket name")
	ErrNoSuchKey           = errors.New("object: no such key")
	ErrInvalidKey          = errors.New("object: invalid object key")
	ErrInvalidRange        = errors.New("object: invalid range")
	ErrNoSuchUpload        = errors.New("object: no such upload")
	ErrInvalidPart         = errors.New("object: invalid part")
	ErrInvalidPartOrder    = errors.New("object: parts not in ascending order")
	ErrEntityTooSmall      = errors.New("object: part smaller than the 5 MiB minimum")
	ErrTooLarge            = errors.New("object: object too large")
	ErrInsufficientStorage = errors.New("object: insufficient storage")
	ErrBadDigest           = errors.New("object: content digest mismatch")
	ErrUnknownClass        = errors.New("object: unknown storage class")
	ErrNoGoodReplica       = errors.New("object: no readable replica")
	ErrIncompleteBody      = errors.New("object: body shorter than declared size")
	// ErrConditionalConflict: the object changed between a conditional
	// write's check and its commit in a way that still satisfies the
	// condition (S3 409 ConditionalRequestConflict); retry.
	ErrConditionalConflict = errors.New("object: conditional write raced with another write; retry")
	// ErrSourceChanged: a copy was asked of the source record the caller
	// read (CopyOptions.SourceRev, PartCopyOptions.SourceRev), and the
	// source is now another record (overwritten, deleted, rewritten);
	// read it again and retry.
	ErrSourceChanged = errors.New("object: copy source changed since it was read; retry")
)
