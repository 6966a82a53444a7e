package server

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"

	"google.golang.org/grpc"

	"github.com/terrace-storage/terrace/internal/cluster"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/zlog/node"
)

// The shared log (docs/log.md) hooks into a node here and nowhere else:
// its gRPC service is registered on the replica RPC server (cluster) or on
// a loopback server of its own (single node), it starts after recovery
// and membership, and its admin routes join the admin API.

// logParts is the node's shared-log service.
type logParts struct {
	svc  *node.Service
	grpc *grpc.Server // single node only: the log's own RPC server
	addr string
}

// registerLog registers the log service on the cluster's RPC server; it
// must run before that server serves.
func (n *Node) registerLog(g *grpc.Server) {
	n.logs = &logParts{svc: node.New(), addr: n.Config.RPCAddress}
	n.logs.svc.Register(g)
}

// openLog starts the shared log. A single node serves the log's RPCs on
// --rpc-address if set, else on a loopback port of its own (its own client
// and the admin API use it), authenticated with --cluster-secret or a
// random one.
func (n *Node) openLog() error {
	secret := n.Config.ClusterSecret
	if n.logs == nil {
		if secret == "" {
			var b [16]byte
			rand.Read(b[:])
			secret = hex.EncodeToString(b[:])
		}
		addr := n.Config.RPCAddress
		if addr == "" {
			addr = "127.0.0.1:0"
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("server: log rpc listen %s: %w", addr, err)
		}
		g := cluster.NewGRPCServer([]byte(secret), nil) // single node: loopback only
		n.logs = &logParts{svc: node.New(), grpc: g, addr: ln.Addr().String()}
		n.logs.svc.Register(g)
		go g.Serve(ln)
	}
	self, selfAddr := n.Config.NodeID, n.logs.addr
	cfg := node.Config{
		Self: self, SelfAddress: selfAddr, Devices: n.Devices, KV: n.KV, Secret: []byte(secret), TLS: n.peerTLS(),
		Policy: n.Layer.Options().Policy, Snapshot: n.Layer.Snapshot, Logger: n.Log,
		// One setting says when a node is given up on: the Curator then
		// re-replicates its egroups, and log hosts re-home its replicas.
		Options: node.Options{ReplaceAfter: n.Config.Curator.NodeDownAfter},
		Address: func(id string) (string, bool) {
			if id == self {
				return selfAddr, true
			}
			if n.cluster == nil {
				return "", false
			}
			ni, ok := n.cluster.members.Node(model.NodeID(id))
			return ni.RPCAddress, ok && ni.RPCAddress != ""
		},
	}
	if n.cluster != nil {
		cfg.Etcd = n.cluster.client
		// Membership's own view, not the object layer's cached snapshot:
		// right after start the cached one may not list every node up yet,
		// and a new segment placed on it could put both replicas of a
		// stripe on one node.
		cfg.Snapshot = n.cluster.members.Snapshot
	}
	if err := n.logs.svc.Start(cfg); err != nil {
		return err
	}
	n.Reg.MustRegister(n.logs.svc.Collectors()...)
	n.Log.Info("shared log service listening", "address", selfAddr)
	return nil
}

// mountLog adds the log's admin routes.
func (n *Node) mountLog(mux *http.ServeMux) {
	if n.logs != nil {
		n.logs.svc.Mount(mux)
	}
}

// closeLog stops the shared log.
func (n *Node) closeLog() {
	if n.logs == nil {
		return
	}
	n.logs.svc.Close()
	if n.logs.grpc != nil {
		n.logs.grpc.Stop()
	}
}

// peerTLS is the mutual-TLS client configuration for node-to-node RPC in
// a TLS cluster (nil otherwise).
func (n *Node) peerTLS() *tls.Config {
	if n.Config.TLSCert == "" || n.Config.TLSCA == "" {
		return nil
	}
	tc, err := n.Config.TLS().PeerClient()
	if err != nil {
		n.Log.Error("peer TLS", "err", err)
		return nil
	}
	return tc
}
