// Package client is the shared log's Go client: Append, Read, Tail, Fill,
// Trim, TrimPrefix and Subscribe on a named log, plus Create, Delete, List
// and Info.
//
// It runs the CORFU client protocol itself: it asks the log's sequencer for
// positions (one RPC per batch of waiting appends, or a leased block of
// positions with leased batching), writes each entry to its stripe's
// primary, which decides write-once and forwards to the backups, and reads
// from primaries (active segment) or any fresh replica (sealed segments).
// When a node fails it reports it, waits for the layout of the next epoch
// and retries the same position, so an acknowledged append is at exactly
// one position even when its first attempt's outcome was unknown.
//
// Concurrent operations bound for one node share RPCs (Batcher); the
// client keeps one connection per node. It authenticates like a peer node
// with the cluster secret: the log's storage trusts its clients.
//
// It must not touch storage or metadata directly: everything goes through
// the Log gRPC service (package zlogpb).
package client
