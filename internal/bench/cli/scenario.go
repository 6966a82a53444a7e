package cli

import "github.com/spf13/cobra"

// Scenario builds the command of a Terrace-specific benchmark, which appears
// as `terrace bench NAME` next to s3, compare and device.
//
// This is the hook for benchmarks that need more than a workload against an
// endpoint — for example "write a hot set, let the curator tier it down,
// then time cold reads", or "kill a node mid-run and measure the repair".
// A scenario composes package bench's building blocks:
//
//   - bench.StartTerrace (or a `dev cluster`) for the system under test,
//     and Terrace.Endpoint for an endpoint carrying the server's pid;
//   - bench.NewRunner / Runner.Run / Runner.Cleanup for each timed phase
//     (Runner.Status feeds a progress display), or bench.Compare to set
//     the scenario against a peer;
//   - bench.Result, bench.WriteTable and bench.WriteJSON for the report,
//     so scenario output reads like every other bench command's.
//
// To add one, put a file in this package (or in a package this one
// imports) that registers it at init time:
//
//	func init() {
//		RegisterScenario(func() *cobra.Command {
//			return &cobra.Command{
//				Use:     "tiering",
//				Short:   "Time reads before and after the curator tiers data down",
//				Example: "  terrace bench tiering --start-terrace -d 30s",
//				RunE:    runTiering,
//			}
//		})
//	}
//
// Give the command an Example, as the built-in ones have: --help must teach.
type Scenario func() *cobra.Command

var scenarios []Scenario

// RegisterScenario adds a scenario to every command tree built by Command
// afterwards. Call it from an init function.
func RegisterScenario(s Scenario) { scenarios = append(scenarios, s) }
