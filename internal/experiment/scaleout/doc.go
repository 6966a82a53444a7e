// Package scaleout runs the Mirador scale-out experiment (Mirador §4.2,
// Fig. 4, scaled to one machine): a local cluster of three nodes serves a
// steady closed-loop S3 load (verified GETs of preloaded objects and PUTs
// of new ones, spread over every node's S3 endpoint); a fourth node,
// configured from the start but held back, joins under load; then the
// planner is applied on the live cluster (`terrace plan apply`, the
// servers configured with the disk_balanced mean=0 rule), and the actuator
// moves replicas onto the new node with its scheduler. The experiment
// records client throughput and p50/p99 latency per second, every node's
// used bytes and the bytes the planned jobs moved, before the join, while
// the new node runs empty, while data moves and after; at the end it
// reads every acknowledged object back and checks each extent is at its
// vector. It writes a per-second CSV, a PNG plot, summary.txt and
// result.json.
//
// The package is an edge like packages rebuild and onoff (whose helpers
// it reuses): it starts processes (package devcluster), talks to them
// over S3 (package bench's client) and their signed admin API on
// loopback, and writes files. It makes no storage decisions and does not
// tune the planner's moves or the actuator's rate: measuring them is the
// point. The pure parts — phases, per-second series, the summary — live
// in stats.go and are unit tested.
package scaleout
