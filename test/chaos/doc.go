// Package chaos runs `terrace chaos` as an operator would — the built
// binary, a fresh directory, a 5-node cluster — and requires its verdict:
// the last line "ok: …" and exit status 0. The short run (60 faults) is
// part of `make test`; `make chaos` runs a longer one.
//
// Run:
//
//	go test ./test/chaos/ -v -timeout 20m
//	go test ./test/chaos/ -v -timeout 20m -seed 7       # another schedule
//	go test ./test/chaos/ -v -timeout 60m -events 300   # longer
//
// On failure the test prints the summary and keeps the run directory
// (schedule, events, history, node logs) for replay with
// `terrace chaos check` and `terrace chaos --seed`.
package chaos
