// Package policy makes Terrace programmable (Malacology): operators write
// short Lua policies that fill hooks — rule, fitness, tiering, balancer
// and class — store them durably and versioned through the metadata
// consensus, and every node swaps them in within milliseconds, without a
// restart; a bad policy cannot hurt the store.
//
// It owns:
//
//   - the registry (Registry): policy/NAME records under meta's p/ prefix
//     with monotonically increasing versions, author, time and source;
//     every change is a compare-and-swap, history is kept, singleton
//     hooks are claimed atomically, and nodes append events (a version
//     disabled, a version that failed to load) to a cluster-wide log;
//   - the per-node Manager: loads every policy at start, watches the
//     registry, compiles each new version and swaps it in atomically
//     (calls in flight keep the version they started with), and runs hook
//     calls with fallback — a version that errors, times out, exceeds a
//     budget or returns the wrong type is reported, the decision is made
//     by its last good version or the built-in default, and after
//     Options.DisableAfter failures in a row it is disabled on the node
//     until a new version arrives;
//   - validation at put time (Put, Validate): compile, load, and run the
//     hook against the live model, rejecting the policy with the Lua error
//     and line;
//   - the hook adapters: Placement (fitness, as a placement.Policy over
//     placement.Weighted), Tiering (curator.TierTuner), Balancer (the
//     assignment half of curator.ScanBalancer), Exec (object classes:
//     atomic read-modify-write of one object through the object layer's
//     ETag precondition, with retry), and Rules (the rule adapter, against
//     the local Rule interface that mirrors the planner's);
//   - Test: what a policy would decide now, on the live model changed by
//     what-ifs, with nothing applied.
//
// The sandbox (subpackage sandbox) bounds every call; this package never
// runs Lua outside it. Adapters are deterministic given their inputs: the
// model views are fresh read-only copies and math.random is seeded from
// the decision's seed or the snapshot time.
//
// It must not be imported by the packages whose behaviour it steers
// (placement, curator, object): they declare the small interfaces they
// consult, and the server wires the adapters in. It performs I/O only in
// the registry, the watch loop and Exec.
//
// Design: docs/design/0005-programmable-policies.md. Operator guide:
// docs/policies.md.
package policy
