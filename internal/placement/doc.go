// Package placement decides where replicas go and in which order replicas
// are read. It owns:
//
//   - the write-placement policies: Uniform (the baseline), Fitness (Allen
//     2018: t_u = 1/a^u, t_q = 1 − q/q_ceil, f_add or f_mult, sampled by a
//     WeightedVector with SUS, truncation, two-choice or uniform
//     selection), Moop (OctopusFS §3: four objectives, the ideal vector,
//     global criterion, greedy Algorithms 1–2 with the paper's pruning),
//     Rules (OctopusFS §7.2's rule-based comparison) and Weighted
//     (Fitness's sampling with weights from a DeviceWeigher: a
//     programmable fitness function such as a Lua policy);
//   - the suitability rules every policy shares: the vector's tier, an
//     online device on an up node, not excluded, distinct devices, distinct
//     nodes when the cluster has enough, and a device stays at or under
//     MaxUsage (95 %) full after the write; distinct racks are preferred
//     when the cluster has them;
//   - Config, New and ParseConfig, which build a policy from configuration;
//   - read ordering (OrderReads, OctopusFS §4.2);
//   - Pending, which folds placements made since the last statistics
//     refresh into a stale snapshot so an attractive device is not herded;
//   - Explain, which runs a policy with a tracer and reports every
//     candidate's scores and the choice;
//   - replication management (Reconcile, OctopusFS §5): what to add and
//     what to drop to take an extent group's replicas to its vector.
//
// Placement is pure decision code: a model.Snapshot and a seeded
// *rand.Rand in, a decision out. It performs no I/O, starts no goroutines,
// never reads the clock (Pending takes time as an argument) and keeps no
// state between calls, so policies are safe for concurrent use and the
// same snapshot and seed always give the same decision. It imports only
// internal/model and the standard library (a test enforces it). The object
// layer, the Curator and the simulator (placement/sim) are the edges that
// gather snapshots and apply decisions.
//
// Guarantees of a successful Place: exactly the vector's replicas, explicit
// tiers met exactly and unspecified (model.TierAny) replicas on tiers the
// policy picked; every suitability rule above holds; unspecified replicas
// never go to memory unless the policy allows it (moop and rules with
// Config.AllowMem), and then memory holds at most a third of the set. A
// failed Place returns an error wrapping ErrNoSuitableDevices that names
// the tier and counts the devices each constraint eliminated.
//
// Preferences are not constraints: "first replica on the client's node",
// "a new rack", and OctopusFS's "prune the first replica's rack, then stay
// on two racks" are tried first and dropped when they would leave no
// candidate, so a heuristic never turns a placeable request into an error.
//
// Limits: a request may hold at most model.MaxReplicas replicas including
// its existing ones; sets are tiny, so per-request state is slices scanned
// linearly. Cost per decision on a 1,000-device cluster: two-choice fitness
// is O(1) per replica (it samples a handful of devices), SUS O(devices),
// truncation O(devices·log devices), moop O(devices·replicas) (see
// docs/perf.md for measured numbers).
//
// The design, the formulas and the deviations from the papers are in
// docs/design/0001-placement.md; operator-facing behaviour is in
// docs/placement.md.
package placement
