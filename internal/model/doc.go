// Package model holds Terrace's vocabulary for the cluster as the decision
// code sees it: tiers, replication vectors, nodes, devices, replicas and the
// immutable Snapshot that placement, the planner and the Curator's decide
// steps take as input.
//
// The package is pure: it performs no I/O, starts no goroutines and never
// reads the wall clock (time arrives as Snapshot.Now). It imports only the
// standard library. Everything that gathers a snapshot from live devices or
// from the metadata store lives at the edges (object, server, cluster).
package model
