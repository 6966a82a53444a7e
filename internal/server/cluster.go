package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"google.golang.org/grpc"

	"github.com/terrace-storage/terrace/internal/cluster"
	"github.com/terrace-storage/terrace/internal/cluster/rpcpb"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
)

// clusterParts are the pieces a clustered node adds.
type clusterParts struct {
	etcd    *embed.Etcd
	client  *clientv3.Client
	members *cluster.Membership
	router  *cluster.Router
	grpc    *grpc.Server
	cancel  context.CancelFunc
}

// openCluster starts the embedded etcd member (if this node is one), the
// etcd client, the replica RPC server and the router. Membership starts
// after recovery so peers see the node only once it can serve.
func (n *Node) openCluster(ctx context.Context) (meta.KV, object.ReplicaIO, object.Topology, error) {
	cfg := n.Config
	cp := &clusterParts{}
	n.cluster = cp
	endpoints := cfg.MetaEndpoints
	if cfg.foundingMember() {
		e, err := cluster.StartMember(cluster.MemberConfig{
			Name: cfg.NodeID, DataDir: cfg.DataDir, PeerURL: cfg.EtcdPeerURL, ClientURL: cfg.EtcdClientURL,
			AdvertisePeerURL: cfg.EtcdAdvertisePeerURL, InitialCluster: cfg.InitialCluster,
			CertFile: cfg.TLSCert, KeyFile: cfg.TLSKey, CAFile: cfg.TLSCA,
		})
		if err != nil {
			return nil, nil, nil, err
		}
		cp.etcd = e
		n.Log.Info("etcd member started", "name", cfg.NodeID, "peer", cfg.EtcdPeerURL, "client", cfg.EtcdClientURL)
	}
	if len(endpoints) == 0 {
		endpoints = cluster.ClientURLsFromInitial(cfg.InitialCluster)
		if cfg.EtcdClientURL != "" {
			// List our own member too; the client balances across all endpoints
			// and fails over when one dies.
			endpoints = append([]string{cfg.EtcdClientURL}, endpoints...)
		}
	}
	var peerTLS, peerServerTLS *tls.Config
	if cfg.TLSCert != "" {
		var err error
		if peerTLS, err = cfg.TLS().PeerClient(); err != nil {
			return nil, nil, nil, err
		}
		if peerServerTLS, err = cfg.TLS().PeerServer(); err != nil {
			return nil, nil, nil, err
		}
	}
	autoSync := 30 * time.Second
	if cfg.StaticMetaEndpoints {
		autoSync = 0 // keep the configured endpoints (proxies, load balancers)
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second,
		Logger: nil, AutoSyncInterval: autoSync, TLS: peerTLS})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("server: etcd client %v: %w", endpoints, err)
	}
	cp.client = c
	self := cluster.NodeInfo{ID: model.NodeID(cfg.NodeID), Rack: cfg.Rack, RPCAddress: cfg.RPCAddress,
		S3Address: cfg.S3Address, AdminAddress: cfg.AdminAddress, NetBps: cfg.NetMBps * 1e6}
	cp.members = cluster.NewMembership(c, self, func() []model.Device { return n.Local.Snapshot().Devices }, n.Log)
	cp.router = cluster.NewRouter(model.NodeID(cfg.NodeID), n.Local, cp.members, []byte(cfg.ClusterSecret), peerTLS)
	if len(cfg.PeerRPCOverride) > 0 { // test hook: dial peers through the chaos suite's proxies
		over := map[model.NodeID]string{}
		for id, addr := range cfg.PeerRPCOverride {
			over[model.NodeID(id)] = addr
		}
		cp.router.OverrideAddresses(over)
		n.Log.Warn("test hook: replica RPC dials overridden peer addresses", "override", cfg.PeerRPCOverride)
	}
	ln, err := net.Listen("tcp", cfg.RPCAddress)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("server: rpc listen %s: %w", cfg.RPCAddress, err)
	}
	cp.grpc = cluster.NewGRPCServer([]byte(cfg.ClusterSecret), peerServerTLS)
	rs := cluster.NewReplicaServer(n.Local, cp.router)
	cp.members.SetConns(rs.InFlight)
	rpcpb.RegisterReplicaServer(cp.grpc, rs)
	n.registerLog(cp.grpc)
	go cp.grpc.Serve(ln)
	n.Log.Info("replica RPC listening", "address", ln.Addr().String())
	kv := cluster.NewEtcdKV(c)
	if cp.etcd != nil {
		// Reads of the data path go straight into this node's member, and
		// so do writes unless configured otherwise.
		kv.ReadLocally(v3client.New(cp.etcd.Server))
		if cfg.MetaWritePath == "local" {
			srv := cp.etcd.Server
			kv.WriteLocally(func() bool { return srv.Leader() != 0 })
		}
	}
	return kv, cp.router, cp.members, nil
}

// startMembership registers the node and starts heartbeats.
func (n *Node) startMembership() error {
	ctx, cancel := context.WithCancel(context.Background())
	n.cluster.cancel = cancel
	if err := n.cluster.members.Start(ctx); err != nil {
		cancel()
		return err
	}
	return nil
}

func (cp *clusterParts) close() {
	if cp == nil {
		return
	}
	if cp.cancel != nil {
		cp.cancel()
		cp.members.Wait()
	}
	if cp.grpc != nil {
		cp.grpc.Stop()
	}
	if cp.router != nil {
		cp.router.Close()
	}
	if cp.client != nil {
		cp.client.Close()
	}
	if cp.etcd != nil {
		cp.etcd.Close()
	}
}

// ClusterStatus is the cluster part of GET /v1/status.
type ClusterStatus struct {
	Nodes   []cluster.NodeView `json:"nodes"`
	Members []MemberStatus     `json:"meta_members"`
}

// MemberStatus is one etcd member's health.
type MemberStatus struct {
	Name     string `json:"name"`
	Endpoint string `json:"endpoint"`
	Healthy  bool   `json:"healthy"`
	Leader   bool   `json:"leader"`
	Error    string `json:"error,omitempty"`
}

func (n *Node) clusterStatus(ctx context.Context) *ClusterStatus {
	if n.cluster == nil {
		return nil
	}
	cs := &ClusterStatus{Nodes: n.cluster.members.Nodes()}
	lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ml, err := n.cluster.client.MemberList(lctx)
	if err != nil {
		cs.Members = append(cs.Members, MemberStatus{Error: err.Error()})
		return cs
	}
	// Ask every member at once, each under its own deadline: a dead
	// member's Status call waits out its timeout, and with one shared
	// deadline every member asked after it was reported unhealthy too
	// (the whole metadata cluster "down", no leader, after losing one).
	cs.Members = make([]MemberStatus, len(ml.Members))
	var wg sync.WaitGroup
	for i, m := range ml.Members {
		ms := &cs.Members[i]
		ms.Name = m.Name
		if len(m.ClientURLs) == 0 {
			continue
		}
		ms.Endpoint = m.ClientURLs[0]
		wg.Add(1)
		go func() {
			defer wg.Done()
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			st, err := n.cluster.client.Status(sctx, ms.Endpoint)
			if err != nil {
				ms.Error = err.Error()
				return
			}
			ms.Healthy = true
			ms.Leader = st.Leader == m.ID
		}()
	}
	wg.Wait()
	return cs
}

// Drain marks a node as draining (its devices take no new replicas; the
// Curator moves their replicas away) or clears the mark.
func (n *Node) Drain(ctx context.Context, id string, on bool) error {
	if n.cluster == nil {
		return fmt.Errorf("server: drain needs cluster mode")
	}
	return n.cluster.members.SetDraining(ctx, model.NodeID(id), on)
}
