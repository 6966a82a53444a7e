// Package cluster turns single nodes into one store: the etcd metadata
// backend (meta.KV over etcd v3, with embedded members so a 3- or 5-node
// Terrace needs nothing else), membership and the watched cluster view that
// placement reads, and the authenticated gRPC data path between nodes.
//
// It owns node registration, heartbeats under etcd leases, failure
// detection (lease expiry marks a node down; device I/O errors mark a
// device failed), the Replica gRPC service and the ReplicaIO router that
// sends each replica operation to the node that owns the device.
//
// Consensus is etcd's: this package never implements its own. It makes no
// placement decisions (package placement) and runs no background repair
// (the Curator); it only reports what it sees.
//
// Writes fan out from the writing node to every replica in parallel rather
// than through a chain (OctopusFS §3.1 pipelines): on loopback and within a
// rack the writer's NIC is not the bottleneck, and fan-out makes latency
// the slowest replica instead of the sum of hops. The acknowledgement rule
// is the same either way: every replica durable, then the metadata commit.
package cluster
