// Package users is Terrace's user store: the S3 accounts other than the
// root account, kept in the metadata store (etcd in a cluster, Pebble on
// one node) so that every node sees a user the moment it is created,
// changed or removed. The S3 gateway resolves access keys through it (its
// auth.IAMService adapter lives in package s3); the admin API and the
// `terrace user` commands manage it.
//
// A user has a name (its identity: bucket owner, ACL grantee and bucket
// policy principal), one access key and a secret. Secrets are generated
// here, returned once to the operator, and stored only sealed with the
// cluster master keyring (package sse); rotating a user's keys replaces
// both the access key and the secret and leaves the identity, and so every
// bucket and grant the user owns, untouched.
//
// Records live under meta.PrefixIAM:
//
//	i/u/<name>        the user record
//	i/k/<access key>  a copy of the record, the index authentication reads
//	i/r/<name>        a removed user's name (when), until a user takes it again
//
// They are always written in one transaction, guarded by compare-and-swap,
// so the index never names a user that does not exist.
//
// Because the name is the identity, a removed user's name stays on the
// buckets, grants and policies that refer to it, and a user created under
// it would inherit them. Add refuses such a name (ErrNameInUse); what
// refers to a name is told by a check the S3 gateway installs
// (SetNameInUse), and until it is installed the name of a removed user
// (i/r/<name>) is refused outright.
//
// It owns user records and credential generation. It must not know about
// S3 requests, buckets or ACLs, and never logs or prints secrets (User has
// no secret field; Credentials is only returned to the caller that created
// or rotated them).
package users
