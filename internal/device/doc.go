// Package device owns the storage media of one node: directory devices,
// RAM devices, their emulation profiles (bandwidth and per-operation latency
// throttles that let one machine host realistic tiers), capacity accounting,
// the live counters placement weighs (used bytes, queue length, active
// streams) and the start-up throughput probe (OctopusFS §3.2).
//
// A device stores named files and nothing else; it knows nothing of
// extent-group layout, checksums or metadata. It never lets a write take
// a device past its capacity: such writes fail with ErrFull and leave
// existing data untouched.
package device
