// Package tiersched answers the Curator's question "tier down now, and by
// how much?" with interchangeable schedulers:
//
//   - Threshold, the default: run when a tier's usage exceeds f and shed
//     h of its capacity, coldest first (Curator §3.3). It is exactly the
//     rule the Curator applied before schedulers existed.
//   - QLearning: a learned agent (internal/curator/learn) decides at each
//     poll whether to tier the fastest local tier down now, whatever its
//     usage (Curator §4.3); slower tiers keep the threshold rule, and a
//     safety ceiling (ForceAbove, default 90 %) forces a run so a wrong
//     model can never fill the fast tier.
//
// A scheduler only chooses when tiering runs and the thresholds the job
// uses (decide.TierOptions, with DemoteAbove naming the tier to shed now);
// which egroups move is still decided by decide.Tiering, the one tiering
// decision the Curator, the tests and the simulator all run.
//
// The package is pure: no I/O, no goroutines, no clock, randomness from
// the caller's *rand.Rand. It imports only decide, learn, model and the
// standard library (imports_test.go). Schedulers are not safe for
// concurrent use; the Curator calls them under its lock.
package tiersched
