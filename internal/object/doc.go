// Package object is Terrace's object layer: buckets and objects over extent
// groups. It chunks object bytes into extents, packs extents into egroups
// whose replicas placement chooses, makes every replica durable, and only
// then commits the metadata that makes the object visible (docs/design/0000
// invariants 1 and 2). Reads verify every slice and fall back across
// replicas in the order placement gives, reporting bad replicas.
//
// It owns the write and read paths, multipart uploads, copies, the
// egroup pool of open egroups, start-up recovery of replica files, the
// periodic sweep of this node's orphan replica files (orphans.go; local
// devices only, started by the server) and the batched egroup-access
// tracker. It must not parse S3 requests (package s3 does) nor run
// background scans of the metadata (the Curator does); it reaches devices
// only through ReplicaIO (recovery and the orphan sweep: the node's own
// Local) so that remote replicas slot in for the cluster.
package object
