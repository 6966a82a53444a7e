// Package sim is the placement simulator: it drives the real placement
// policies (internal/placement) against simulated clusters on a simulated
// clock and reproduces the experiments of the fitness thesis (Allen 2018,
// §3.3, §4, Appendix A) and OctopusFS (SIGMOD'17, §7.2), writing CSV
// files, PNG plots (gonum.org/v1/plot) and a markdown summary.
//
// The simulator is an edge, like the object layer: it owns files and a
// clock, gathers model.Snapshots from its simulated devices, calls
// placement.Policy.Place, applies the decision, and folds placements made
// between statistics refreshes in with placement.Pending exactly as the
// object layer does. It never re-implements policy logic. Only the sampler
// run-time experiment (Fig. 13) reads the wall clock, because measuring
// run time is its point.
//
// Every experiment derives its randomness from Options.Seed, so a run is
// reproducible; the run-time measurements are the one exception.
//
// Entry point: Run(Options, outDir). Options' zero value runs every
// experiment with the defaults in about 10-20 s on 2 cores.
package sim
