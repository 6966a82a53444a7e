// Package placement decides where replicas go and in which order replicas
// are read. It owns the write-placement policies (uniform, fitness, moop,
// rules), the read ordering of OctopusFS §4.2, and replication management
// (what to add and what to drop to reach a vector).
//
// Placement is pure decision code: a model.Snapshot and a seeded *rand.Rand
// in, a decision out. It performs no I/O, starts no goroutines and never
// reads the clock; it imports only internal/model and the standard library.
// The object layer and the Curator are the edges that gather snapshots and
// apply decisions.
package placement
