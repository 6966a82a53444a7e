// Package s3 is Terrace's S3 gateway: a versitygw backend.Backend over the
// object layer, and Serve, which runs versitygw's embedded gateway over it.
//
// # What it owns
//
//   - Translating versitygw's parsed requests (s3.*Input, s3response.*) into
//     object-layer calls and the layer's records back into responses:
//     ranges, part numbers, copy sources and copy ranges, preconditions,
//     content headers, user metadata, tags, storage classes, listing
//     pagination tokens and ETag quoting (translate.go).
//   - Mapping object-layer errors to s3err API errors (errors.go); anything
//     unexpected is logged here and answered as InternalError.
//   - Verifying x-amz-checksum-* request checksums for PutObject and
//     UploadPart, which versitygw leaves to the backend (it verifies
//     Content-MD5 and aws-chunked trailing checksums itself).
//   - Opaque bucket sub-resources (ACL, policy, ownership, CORS, website,
//     tagging) stored as bytes in the bucket record's Attrs.
//
// # What it must not do
//
//   - No S3 wire format of its own: no XML, no SigV4 or presigned-URL
//     verification, no HTTP routing. versitygw does all of that; this package
//     only sees typed inputs. Wrong signatures are rejected (403) before a
//     backend method runs.
//   - No placement, replication or durability logic: the object layer owns
//     the write and read paths and the meaning of a replication vector. A
//     storage class is passed through by name; the layer resolves it with its
//     configured class table (object.Options.Classes).
//   - No direct metadata-store access: everything goes through
//     object.Layer's exported API.
//
// # Semantics worth knowing
//
//   - Buckets are unversioned. Version IDs other than "null" are rejected
//     with InvalidArgument; ListObjectVersions reports every object as its
//     single "null" version.
//   - Conditional PUT and CompleteMultipartUpload (If-Match /
//     If-None-Match) are checked before any data is written and again
//     atomically with the metadata commit (compare-and-swap on the object
//     record): of two racing create-only writers exactly one succeeds, the
//     other gets 412; a write whose object changed in between but still
//     passes gets 409 ConditionalRequestConflict, as on AWS.
//   - CopyObject without x-amz-storage-class keeps the source's class and
//     replication vector (the object layer's rule), where AWS would reset
//     the copy to STANDARD.
//   - The x-amz-storage-class header of PutObject and CreateMultipartUpload
//     is not part of what versitygw passes; it is read from the underlying
//     request (fasthttp), which is the context versitygw hands to every
//     backend call.
//   - When every tier able to hold a write is full (object.
//     ErrInsufficientStorage) the answer is 507 InsufficientStorage, the
//     code versitygw itself uses for ENOSPC.
//
// embedgw supports one gateway per process (package-level state in
// versitygw), so Serve may run only once at a time.
package s3
