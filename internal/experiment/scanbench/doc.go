// Package scanbench measures the Curator's scan throughput on a local
// cluster (`terrace bench scan`): for each cluster size it starts a dev
// cluster, loads synthetic egroup and access records straight into the
// metadata store (etcd), and times partial scans with the map stage on
// the master alone and spread over every node, reading per node the
// records mapped and their rate from `curator status`.
//
// Like the other experiments it is an edge: it starts processes (package
// devcluster), writes metadata through the etcd client (package cluster's
// KV, the same code the servers commit with) and reads the signed admin
// API. It decides nothing: the scans, their assignment and their timing
// are the servers'.
//
// It depends on the etcd client (go.etcd.io/etcd/client/v3, already the
// cluster's) to load records, and on nothing new.
package scanbench
