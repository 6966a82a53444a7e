// Package rebuild runs the Mirador failure experiment (Mirador §4.1,
// Fig. 2, scaled to one machine): a local multi-node cluster is preloaded,
// serves a steady open-loop client load through one entry node, and one
// device on another node fails (an injected EIO on every read and write,
// through the --fault-injection test endpoint, so the node finds the
// failure the way it finds a dying disk). The load keeps running until
// the Curator has every egroup fully protected again, plus a tail. The
// experiment reports the time to protection, the bytes re-replicated,
// client latency (mean, p99) and errors before, during and after the
// rebuild, verifies every acknowledged object's replicas and bytes at the
// end, and writes a per-second CSV, a PNG plot and summary.txt.
//
// The package is an edge like package onoff (whose load generator it
// reuses): it starts processes (package devcluster), talks to them over
// their signed admin API on loopback, and writes files. It makes no
// storage decisions and does not tune the Curator's move rate or limits:
// measuring them is the point. The pure parts — phase splitting,
// percentiles, the protection rule over job records, the per-second
// series and the summary — live in stats.go and are unit tested.
package rebuild
