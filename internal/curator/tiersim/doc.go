// Package tiersim is `terrace sim tiering`: a time-stepped model of one
// node's ssd and hdds running the production tiering code — the
// schedulers of internal/curator/tiersched deciding when to tier,
// decide.Tiering deciding what moves, the default placement policy
// placing new egroups — under the five workloads of Curator Appendix D,
// scaled down, to reproduce Table 1 (mean latency and ssd reads, fixed
// thresholds vs Q-learning). docs/design/0006 explains the model and its
// limits.
//
// It owns the simulated node: devices with the emulation profiles'
// service times and an M/G/1 queue per time step, egroups written
// log-structured with block-level liveness, per-egroup access windows,
// a mover with the actuator's AIMD byte rate, and the Curator's job
// cadence. It must not fork decision logic: every tiering, placement and
// scheduling choice is a call into the production packages. It performs
// I/O only in output.go (CSV, PNG, JSON, summary) and is deterministic:
// the same options and seed give the same numbers.
//
// It uses gonum/plot (already a dependency, as in internal/placement/sim)
// for the PNG plots.
package tiersim
