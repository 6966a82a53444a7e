// Package rebuild runs the Mirador failure experiment (terrace bench
// rebuild, package internal/experiment/rebuild) end to end in miniature on
// a real dev cluster: real `terrace server` processes, a real injected
// device failure, the real Curator. It asserts that protection comes back
// and that no acknowledged read failed; latency is measured, never
// asserted (see docs/perf.md).
package rebuild
