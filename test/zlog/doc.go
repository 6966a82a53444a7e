// Package zlog holds the shared log's real-process tests: each starts
// `terrace server` processes on loopback through internal/devcluster
// (embedded etcd, real RPC, real journals on disk), drives them with the
// Go client and the CLI, kills nodes with SIGKILL, and checks the recorded
// history with internal/zlog/checker.
//
// Run (sparingly on a shared 2-core machine):
//
//	nice -n 10 go test ./test/zlog/ -v -timeout 15m
//	nice -n 10 go test ./test/zlog/ -v -run SequencerKill -rounds 5
package zlog
