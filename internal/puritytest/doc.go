// Package puritytest checks, from a package's own tests, that decision
// code stays pure: it imports only the packages it is allowed to (model,
// other pure deciders, the standard library), none of the standard
// library's I/O, shared-state or clock packages, and does not read the
// clock. Decision code takes a snapshot and a seed and returns a decision
// (docs/design/0000); this is the test that keeps it so.
//
// It is imported only by _test.go files; it owns nothing else and must
// not be imported by production code.
package puritytest
