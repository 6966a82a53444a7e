// Package cluster holds Terrace's real-process cluster tests: every test
// starts `terrace server` processes on loopback through internal/devcluster
// (embedded etcd members, real replica RPC, unthrottled devices), drives
// them through the admin API and the replica RPC port, and kills, restarts
// or removes nodes with real signals.
//
// Run:
//
//	go test ./test/cluster/ -v -timeout 15m
//	go test ./test/cluster/ -v -timeout 15m -run KillNode -long   # 6,000 objects under kill -9 (default 2,000)
//
// TestMain builds the terrace binary once; a cached result is replayed
// only while none of the binary's source directories changed. Each test
// uses its own block of ports (probed free before use) and its own data
// directory, and stops its cluster when it ends; on failure the tail of
// every node's log is printed.
package cluster
