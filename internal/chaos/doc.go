// Package chaos runs Terrace under faults and checks that it kept its
// promises: `terrace chaos` starts a multi-process dev cluster on
// loopback, drives a mixed S3 load through every node while a nemesis
// crashes, pauses, partitions and corrupts it on a seeded schedule, heals
// everything, waits for the Curator to restore every object's vector, and
// checks the recorded history. Design: docs/design/0009-chaos-suite.md;
// operator view: docs/reliability.md.
//
// # What it owns
//
//   - The run ([Run]): cluster wiring (every node-to-node byte — replica
//     RPC, etcd client and etcd raft traffic — crosses one of the suite's
//     proxies, subpackage proxy), the fault executor for the schedule the
//     nemesis subpackage plans, the client load and its history
//     (subpackage history), the settle phase (heal, Curator scans until
//     every object is at its vector, final reads) and the verdict
//     (subpackage history/checker plus the cluster-side checks: vectors,
//     dangling references, bit rot left undetected).
//   - The summary whose last line is `ok: …` or `FAIL: …`, and the files a
//     run leaves in its directory: schedule.txt, events.jsonl,
//     history.jsonl, summary.json, node logs.
//
// # What it must not do
//
// It talks to nodes only as a client or operator would — S3, the signed
// admin API (including the --fault-injection test endpoint), signals to
// processes it started — plus two things a real fault does: it owns the
// network between the nodes (the proxies) and it flips bytes in egroup
// files on disk (bit rot). It never reads or writes a node's metadata.
// It kills only the processes it started.
//
// # Dependencies and why
//
//   - github.com/aws/aws-sdk-go-v2/service/s3: the client load speaks real
//     S3 through the gateway users reach, with retries off so every
//     outcome is recorded as it happened.
//   - github.com/anishathalye/porcupine (through history/checker): the
//     linearizability search.
package chaos
