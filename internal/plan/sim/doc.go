// Package sim reproduces Mirador's solver benchmark (FAST'17 §4.1, Table
// 2) against the real planner (internal/plan): clusters of N objects on M
// fixed-capacity devices (at most ten per node), sizes and loads drawn
// from a bounded Pareto distribution, about 65 % full, placed uniformly at
// random; the policy is device_has_space + load_balanced (spread 20 %).
// For each size it reports the solve time, the initial and final cost and
// the moves, and writes a CSV and a log-log PNG of solve time against N
// (gonum.org/v1/plot, already used by the placement simulator).
//
// The package is an edge: it owns files and reads the wall clock, because
// measuring the solver's run time is its point. Cluster generation
// (Generate) is pure and seeded — the same spec and seed give the same
// model — and is what the planner benchmark in bench_test.go uses. It never
// re-implements planner logic.
//
// Entry points: Generate(ClusterSpec) and Run(Options).
package sim
