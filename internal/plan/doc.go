// Package plan is Terrace's planner (Mirador, FAST'17 §3): placement
// policy as a set of small rules, each an objective function over a model
// of the cluster, and solvers that search for the cheapest layout and
// return it as a plan of moves. It owns:
//
//   - the planner's model (Model, Device, Egroup: devices with tier, node,
//     rack, capacity, usage, load and health; egroups with size, load,
//     working set, replicas, vector and bucket), its validation and a text
//     format that prints and parses back (ParseModel, Model.String);
//   - the Rule interface — name, scope, parameters, Cost(view) — with the
//     optional HardRule (excess), Hinter (solver hints), TierWide and
//     BucketRule extensions, and the View a rule reads the layout through;
//   - the built-in rules (Builtins: device_has_space, load_balanced,
//     disk_balanced, rplset_durable, failure_domain_spread, vector_satisfied, tier_fill,
//     working_set_fits, isolate, co_locate) and the rule-set parser
//     (ParseRuleSet: "load_balanced spread=0.2" per line);
//   - Search, the incremental cost engine solvers work through, the
//     pluggable Solver interface, the Greedy solver of Mirador Listing 3
//     with its second pass, and Restarts, a random first-improvement
//     solver that proves the seam;
//   - Solve and Run (batch by batch), which produce a Plan: ordered moves
//     (egroup, from, to, the rules each lowers, the total cost before and
//     after), per-rule costs, the hard rules that could not be met (the
//     operator alert) and the egroups with no readable replica.
//
// Guarantees of a plan, executed in order one move at a time (copy to the
// destination, verify, switch metadata, delete the source): no move
// targets a device that is failed, bad, draining or without room for the
// egroup; every copy has a readable source; no replica set ever has fewer
// live replicas than before; every first-pass move lowers the total cost
// and every second-pass group lowers it as a whole, so the plan never ends
// costlier than it started and never trades a broken hard rule for soft
// gains. The same model, rules, options and seed give the same plan.
// docs/planner.md explains the rules and solvers; docs/design/0003-planner.md
// the design.
//
// The package is pure decision code: it performs no I/O, reads no clock,
// starts no goroutines and keeps no global state; randomness comes from
// Options.Seed. It imports only internal/model and the standard library (a
// test enforces it) and adds no dependency. It must not know how the model
// was gathered or how moves are executed: building the model from a
// Curator scan and applying plans belong to the actuator; the simulator
// (plan/sim) and the tests are its other edges.
//
// Cost: a move's delta re-evaluates only the rule instances it touches
// (see Search), so the greedy solver plans Mirador's 100K-object /
// 1K-device benchmark in about 0.1 s and 1M / 10K in a few seconds on two
// cores (docs/perf.md).
package plan
