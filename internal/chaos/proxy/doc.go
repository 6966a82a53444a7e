// Package proxy is the chaos suite's network: thin TCP proxies between the
// nodes of a loopback dev cluster, each carrying one directed link
// (source node → destination node), whose faults the nemesis sets.
//
// # What it owns
//
//   - [Network]: the fault table (a [Fault] per [Link]) and every proxied
//     connection, grouped by link, so that cutting a link also closes the
//     connections already open on it.
//   - Proxies ([Network.Listen]) that know their link up front (one
//     listener per source and destination: replica RPC, etcd client
//     traffic), and proxies that identify the sender of each incoming
//     connection from its first HTTP request ([Network.ListenHTTP]: etcd's
//     raft traffic, which names the sending member in the X-PeerURLs and
//     X-Server-From headers), so one listener in front of a member serves
//     every sender and can still cut X↔Y both ways.
//   - Faults as TCP sees them on a real network: a cut link resets new
//     connections and closes open ones (a rejecting firewall); a
//     blackholed link accepts and holds every byte until healed (a silent
//     partition: the sender's timeouts must notice); a lossy link resets a
//     fraction of connections; a slow link delays every byte.
//
// # What it must not do
//
// It never alters, drops or reorders bytes inside a connection — TCP does
// not either — so every fault is one a real network can produce. It knows
// nothing of Terrace: links are named by node ID strings. It speaks plain
// TCP only (chaos clusters run without TLS; the raft proxy must read HTTP
// headers).
//
// Only the standard library is used.
package proxy
