// Package scaleout runs the Mirador scale-out experiment (terrace bench
// scaleout, package internal/experiment/scaleout) end to end in miniature
// on a real dev cluster: real `terrace server` processes, a fourth node
// joining under load, the real planner applied on the live cluster and
// the real actuator moving replicas. It asserts that the new node ends up
// holding moved data, that no acknowledged object is lost or corrupt and
// that every extent is at its vector; throughput and latency are
// measured, never asserted (see docs/perf.md).
package scaleout
