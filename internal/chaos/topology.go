package chaos

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/terrace-storage/terrace/internal/chaos/proxy"
	"github.com/terrace-storage/terrace/internal/devcluster"
)

// topology puts a proxy on every node-to-node path of a dev cluster:
//
//   - replica RPC: one proxy per ordered pair (A, B), which A dials for B
//     (--peer-rpc-override);
//   - etcd client traffic: one proxy per (node, member), listed in the
//     node's --meta-endpoints (a member reaches its own member directly:
//     that is no network);
//   - etcd raft traffic: one proxy per member, the peer URL it advertises;
//     it tells senders apart by the X-PeerURLs (or X-Server-From) header
//     of their requests.
//
// A fault on link A→B then applies to all three kinds of traffic.
type topology struct {
	net     *proxy.Network
	nodes   []string
	members []string
	// raftURL[j] is member j's advertised peer URL (its proxy).
	raftURL []string
	// metaEndpoints[i] are node i's etcd client endpoints.
	metaEndpoints [][]string
	// rpcOverride[i] maps every other node to the proxy node i dials.
	rpcOverride []map[string]string

	idMu     sync.Mutex
	urlOwner map[string]string // advertised peer URL → node
	idOwner  map[string]string // etcd member ID (hex) → node, learned
}

func newTopology(o *Options, dc *devcluster.Options) (*topology, error) {
	t := &topology{net: proxy.NewNetwork(o.Seed), urlOwner: map[string]string{}, idOwner: map[string]string{}}
	for i := 0; i < o.Nodes; i++ {
		t.nodes = append(t.nodes, nodeName(i))
		if i < o.Members {
			t.members = append(t.members, nodeName(i))
		}
	}
	addr := func(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }
	fail := func(err error) (*topology, error) {
		t.net.Close()
		return nil, err
	}
	for j := range t.members {
		p, err := t.net.ListenHTTP("127.0.0.1:0", addr(dc.Port(j, devcluster.PortEtcdPeer)), nodeName(j), t.identify)
		if err != nil {
			return fail(err)
		}
		u := "http://" + p.Addr()
		t.raftURL = append(t.raftURL, u)
		t.urlOwner[u] = nodeName(j)
	}
	for i := range t.nodes {
		var eps []string
		if i < o.Members {
			eps = append(eps, "http://"+addr(dc.Port(i, devcluster.PortEtcdClient)))
		}
		for j := range t.members {
			if j == i {
				continue
			}
			p, err := t.net.Listen("127.0.0.1:0", addr(dc.Port(j, devcluster.PortEtcdClient)), nodeName(i), nodeName(j))
			if err != nil {
				return fail(err)
			}
			eps = append(eps, "http://"+p.Addr())
		}
		t.metaEndpoints = append(t.metaEndpoints, eps)
		over := map[string]string{}
		for j := range t.nodes {
			if j == i {
				continue
			}
			p, err := t.net.Listen("127.0.0.1:0", addr(dc.Port(j, devcluster.PortRPC)), nodeName(i), nodeName(j))
			if err != nil {
				return fail(err)
			}
			over[nodeName(j)] = p.Addr()
		}
		t.rpcOverride = append(t.rpcOverride, over)
	}
	dc.AdvertisePeerURL = func(j int) string { return t.raftURL[j] }
	dc.MetaEndpoints = func(i int) []string { return t.metaEndpoints[i] }
	prev := dc.NodeArgs
	dc.NodeArgs = func(i int) []string {
		var args []string
		if prev != nil {
			args = prev(i)
		}
		var pairs []string
		for _, n := range sortedKeys(t.rpcOverride[i]) {
			pairs = append(pairs, n+"="+t.rpcOverride[i][n])
		}
		return append(args, "--peer-rpc-override", strings.Join(pairs, ","))
	}
	return t, nil
}

func nodeName(i int) string { return fmt.Sprintf("n%d", i+1) }

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// identify names the member that sent a raft request: etcd puts the
// sender's advertised peer URLs in X-PeerURLs (which are our proxies, one
// per member) and its member ID in X-Server-From. IDs are learned from
// requests carrying both, for the few that carry only the ID.
func (t *topology) identify(h http.Header) string {
	t.idMu.Lock()
	defer t.idMu.Unlock()
	id := h.Get("X-Server-From")
	for _, u := range strings.Split(h.Get("X-PeerURLs"), ",") {
		if n, ok := t.urlOwner[strings.TrimSpace(u)]; ok {
			if id != "" {
				t.idOwner[id] = n
			}
			return n
		}
	}
	return t.idOwner[id]
}

// linkFaults combines the network faults in force into one fault per
// link: a cut beats a blackhole, which beats drops and delays; drop rates
// and delays take the largest.
func combine(faults []map[proxy.Link]proxy.Fault) map[proxy.Link]proxy.Fault {
	out := map[proxy.Link]proxy.Fault{}
	for _, m := range faults {
		for l, f := range m {
			g := out[l]
			g.Cut = g.Cut || f.Cut
			g.Blackhole = g.Blackhole || f.Blackhole
			g.DropRate = max(g.DropRate, f.DropRate)
			g.Delay = max(g.Delay, f.Delay)
			out[l] = g
		}
	}
	for l, g := range out {
		if g.Cut {
			out[l] = proxy.Fault{Cut: true}
		} else if g.Blackhole {
			out[l] = proxy.Fault{Blackhole: true}
		}
	}
	return out
}

// nodeLinks are every link to and from node.
func (t *topology) nodeLinks(node string, f proxy.Fault) map[proxy.Link]proxy.Fault {
	out := map[proxy.Link]proxy.Fault{}
	for _, o := range t.nodes {
		if o != node {
			out[proxy.Link{From: node, To: o}] = f
			out[proxy.Link{From: o, To: node}] = f
		}
	}
	return out
}

// crossLinks are every link between the two sides, both ways.
func crossLinks(sides [2][]string, f proxy.Fault) map[proxy.Link]proxy.Fault {
	out := map[proxy.Link]proxy.Fault{}
	for _, a := range sides[0] {
		for _, b := range sides[1] {
			out[proxy.Link{From: a, To: b}] = f
			out[proxy.Link{From: b, To: a}] = f
		}
	}
	return out
}
