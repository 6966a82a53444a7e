// Package transformbench measures the Curator's transformations of cold
// data (docs/design/0010-curator-transforms.md) on one node built in a
// scratch directory: real Pebble, real files on several devices, the real
// object layer and Curator. It writes a mixed data set (JSON logs, already
// compressed media, VM-image-like blocks with duplicates), then records
// physical bytes, transform throughput and GET latency before and after
// each transform. `terrace bench transform` runs it; docs/perf.md holds
// its numbers.
//
// It owns nothing but the measurement: it changes no code path, and it
// touches only the scratch directory it is given.
package transformbench
