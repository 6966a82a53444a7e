// Package s3 is Terrace's S3 gateway: a versitygw backend.Backend over the
// object layer, and Serve, which runs versitygw's embedded gateway over it
// with Terrace's users (StoreIAM) and a few routes and wrappers of its own.
// Design: docs/design/0008-s3-users-encryption-lifecycle.md.
//
// # What it owns
//
//   - Translating versitygw's parsed requests (s3.*Input, s3response.*) into
//     object-layer calls and the layer's records back into responses:
//     ranges, part numbers, copy sources and copy ranges, preconditions,
//     content headers, user metadata, tags, storage classes, listing
//     pagination tokens and encodings, ETag quoting (translate.go, list.go).
//   - Mapping object-layer errors to s3err API errors (errors.go); anything
//     unexpected is logged here and answered as InternalError.
//   - Encryption at rest (sse.go): SSE-S3 and SSE-C headers, sealing data
//     keys (package sse does the cryptography), encrypting bodies before the
//     object layer sees them and decrypting ranged reads, bucket default
//     encryption (bucketenc.go).
//   - Checksums (checksum.go): verifying x-amz-checksum-* of writes that
//     versitygw leaves to the backend, storing them with objects and parts,
//     composite and full-object multipart checksums.
//   - Users and access control: StoreIAM (iam.go) is versitygw's
//     IAMService over package users; object ACLs, object ownership and
//     AWS's ACL XML (acl.go); public access block (pab.go).
//   - Lifecycle configuration (lifecycle.go): the XML into a
//     lifecycle.Config stored with the bucket; package lifecycle runs it.
//   - Bucket sub-resources versitygw answers with a fixed NotImplemented,
//     served by routes mounted in front of its table with its own
//     authentication and authorization chain (routes.go).
//   - HTTP-level fixes below the backend interface (wire.go, protocol.go):
//     uploads without Content-Length, Expect: 100-continue after
//     authentication, bucket-name rules, 304 headers.
//
// # What it must not do
//
//   - No SigV4 or presigned-URL verification and no request routing of its
//     own: versitygw does that (Terrace's routes and the Expect hook call
//     versitygw's middlewares). XML of its own only for the documents
//     versitygw does not handle (ACL answers, encryption, lifecycle and
//     public-access-block configurations).
//   - No placement, replication or durability logic: the object layer owns
//     the write and read paths and the meaning of a replication vector. A
//     storage class is passed through by name; the layer resolves it with its
//     configured class table (object.Options.Classes).
//   - No direct metadata-store access for data: everything goes through
//     object.Layer's exported API (its records, object.Record and
//     object.BucketRecord, are read and updated through it; this package
//     does not import internal/meta).
//   - Never log secrets or keys.
//   - Never keep a string from a request past the request: versitygw's
//     HTTP server (fiber over fasthttp) hands out names and headers that
//     alias request buffers it reuses. Anything retained (a cache key, a
//     goroutine that outlives the request) takes strings.Clone; the object
//     layer clones the keys of its bucket cache for the same reason.
//
// # Semantics worth knowing
//
//   - Versioning (Enabled / Suspended), version IDs on every write,
//     reads, copies and deletes by versionId, delete markers and
//     ListObjectVersions are the object layer's history model; objects
//     written before versioning was enabled are their "null" version.
//     Snapshots are served as read-only buckets named B--snap-NAME.
//   - Conditional PUT and CompleteMultipartUpload (If-Match /
//     If-None-Match) are checked before any data is written and again
//     atomically with the metadata commit (compare-and-swap on the object
//     record): of two racing create-only writers exactly one succeeds, the
//     other gets 412; a write whose object changed in between but still
//     passes gets 409 ConditionalRequestConflict, as on AWS.
//   - CopyObject without x-amz-storage-class keeps the source's class and
//     replication vector (the object layer's rule), where AWS would reset
//     the copy to STANDARD.
//   - Headers versitygw does not pass (x-amz-storage-class of PutObject and
//     CreateMultipartUpload, SSE, ACL and grant headers, encoding-type) are
//     read from the underlying request (fasthttp), which is the context
//     versitygw hands to every backend call; response headers it does not
//     write (SSE) are set there too.
//   - Stored object and upload headers carry, besides content headers, the
//     encryption record (x-terrace-sse), owner and ACL (x-terrace-owner,
//     x-terrace-acl) and checksums (x-amz-checksum-*); only content headers
//     are ever returned as such.
//   - When every tier able to hold a write is full (object.
//     ErrInsufficientStorage) the answer is 507 InsufficientStorage, the
//     code versitygw itself uses for ENOSPC.
//
// embedgw supports one gateway per process (package-level state in
// versitygw), so Serve may run only once at a time.
package s3
