// Package onoff runs the Curator ON/OFF experiment (Curator §3.4.2 and
// Appendix C, scaled to one machine): the same OLTP-like workload twice on
// a local multi-node cluster with a small emulated ssd tier and a large
// emulated hdd tier, once with the Curator's background tasks enabled and
// once disabled, in prefill, execution and destroy phases. It records ssd
// and hdd usage and client latency over time and the space left after
// destroy, and writes a CSV, a PNG plot and a markdown summary.
//
// The package is an edge: it starts processes (package devcluster), sends
// traffic to loopback only, with bounded loops, and writes files. It makes
// no storage decisions; the servers' Curator does.
package onoff
