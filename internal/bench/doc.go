// Package bench measures S3 endpoints and storage devices so that every speed
// claim Terrace makes is a number taken in the same run as the system it is
// compared with.
//
// # What it owns
//
//   - The S3 load generator ([Run], [Runner]): PUT, GET, HEAD, LIST, DELETE and
//     mixed workloads over a keyspace, object sizes drawn from a [SizeDist],
//     fixed concurrency, a duration and/or an operation count, an untimed
//     warm-up, and byte-for-byte verification of every GET.
//   - Object content ([Content]): a pure function of (seed, key), so a GET is
//     verified without keeping a copy of what was written, across processes
//     and across runs.
//   - Statistics ([Histogram], [Result]): per-operation counts, bytes, errors,
//     latency percentiles (p50/p90/p99/p99.9/max, within 0.4 %), client CPU
//     (getrusage) and, for a local server, its CPU seconds and peak resident
//     memory read from /proc.
//   - Side-by-side comparison ([Compare]): the same workload against several
//     endpoints in alternation (A B A B …) with per-operation ratios, so a
//     comparison holds while the machine's speed drifts.
//   - The device baseline ([MeasureDevice]): sequential and random throughput
//     and the serial fsync rate of a directory, through fio when installed,
//     otherwise a built-in test.
//   - Starting a local single-node Terrace for a benchmark ([StartTerrace]).
//
// The cobra commands live in the cli subpackage.
//
// # What it must not do
//
// It imports no other Terrace package: it talks to Terrace only over S3 and
// by launching the binary, exactly as it talks to a peer system, so a
// comparison cannot be skewed by a private shortcut. It sends traffic only to
// the endpoints it is given, and every run is bounded in time, operation
// count, errors and buffer memory (see [Options]).
//
// # Dependencies and why
//
//   - github.com/aws/aws-sdk-go-v2/service/s3 (+ aws, credentials): the S3
//     client users actually run; path-style addressing, static credentials, no
//     retries (a benchmark counts failures instead of hiding them), and no
//     shared config files, so a run depends only on its flags. The config
//     package is deliberately not used for that reason.
//   - github.com/versity/versitygw (tests only): the same S3 front end Terrace
//     embeds, run in-process over its posix backend, is the end-to-end target.
//   - fio (optional, external binary): the reference tool for device numbers;
//     its JSON output is parsed. Without it a small built-in Go test runs.
//   - Standard library only for statistics: the latency histogram is a
//     log-linear bucket array (128 sub-buckets per power of two), a few dozen
//     lines, so an HDR histogram library would not pay for itself.
package bench
