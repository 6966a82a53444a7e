// Package decide holds the Curator's decisions: given the joined results
// of a scan (each extent group with its live bytes, replicas, vector and
// access record) and a cluster snapshot, it returns tasks. It is the
// "reduce" half of every Curator job (Curator §3.1–§3.3).
//
// The package is pure: no I/O, no goroutines, no clock (time arrives in
// Input.Now), randomness from a seeded *rand.Rand. It imports only model,
// placement and the standard library, so the same code runs in the server,
// in tests, in dry runs and in the simulator.
package decide
