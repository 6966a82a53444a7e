package main

import (
	"github.com/spf13/pflag"

	"github.com/terrace-storage/terrace/internal/server"
)

// Flags for nodes reached through something in between (a proxy, NAT, a
// load balancer) and the chaos suite's test hooks. They live here so that
// server.go keeps the everyday flags.

func addServerHookFlags(f *pflag.FlagSet, c *server.Config) {
	f.StringVar(&c.EtcdAdvertisePeerURL, "etcd-advertise-peer-url", "", "peer URL this node's etcd member announces when peers reach it through a proxy or NAT (default --etcd-peer-url)")
	f.BoolVar(&c.StaticMetaEndpoints, "static-meta-endpoints", false, "keep the etcd client on --meta-endpoints (proxies, load balancers) instead of the members' advertised client URLs")
	f.StringToStringVar(&c.PeerRPCOverride, "peer-rpc-override", nil, "TEST HOOK (chaos suite): dial these replica RPC addresses for these nodes, e.g. n2=127.0.0.1:7002,n3=127.0.0.1:7003")
	f.BoolVar(&c.FaultInjection, "fault-injection", false, "TEST HOOK (chaos suite): allow injecting device faults through the admin API (POST /v1/debug/fault); never in production")
}

func applyServerHookFlags(f *pflag.FlagSet, from server.Config, to *server.Config) {
	if f.Changed("etcd-advertise-peer-url") {
		to.EtcdAdvertisePeerURL = from.EtcdAdvertisePeerURL
	}
	if f.Changed("static-meta-endpoints") {
		to.StaticMetaEndpoints = from.StaticMetaEndpoints
	}
	if f.Changed("peer-rpc-override") {
		to.PeerRPCOverride = from.PeerRPCOverride
	}
	if f.Changed("fault-injection") {
		to.FaultInjection = from.FaultInjection
	}
}
