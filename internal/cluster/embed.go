package cluster

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
)

// MemberConfig configures this node's embedded etcd member.
type MemberConfig struct {
	Name      string
	DataDir   string
	PeerURL   string // e.g. http://127.0.0.1:2380
	ClientURL string // e.g. http://127.0.0.1:2379
	// AdvertisePeerURL is the peer URL announced to the other members when
	// it differs from PeerURL (a proxy in front of the member). Empty:
	// PeerURL.
	AdvertisePeerURL string
	// InitialCluster is "name=peerURL,..." for every founding member.
	InitialCluster string
	// Existing joins a running cluster instead of founding one.
	Existing bool
	// CertFile, KeyFile and CAFile, when set, make peer and client traffic
	// mutual TLS with certificates from the cluster CA (URLs https://).
	CertFile, KeyFile, CAFile string
}

// StartMember starts an embedded etcd member and waits until it is ready.
func StartMember(c MemberConfig) (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Name = c.Name
	cfg.Dir = filepath.Join(c.DataDir, "etcd")
	pu, err := url.Parse(c.PeerURL)
	if err != nil {
		return nil, fmt.Errorf("cluster: peer url %q: %w", c.PeerURL, err)
	}
	cu, err := url.Parse(c.ClientURL)
	if err != nil {
		return nil, fmt.Errorf("cluster: client url %q: %w", c.ClientURL, err)
	}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	if c.AdvertisePeerURL != "" {
		au, err := url.Parse(c.AdvertisePeerURL)
		if err != nil {
			return nil, fmt.Errorf("cluster: advertise peer url %q: %w", c.AdvertisePeerURL, err)
		}
		cfg.AdvertisePeerUrls = []url.URL{*au}
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.InitialCluster = c.InitialCluster
	cfg.InitialClusterToken = "terrace"
	if c.Existing {
		cfg.ClusterState = embed.ClusterStateFlagExisting
	}
	cfg.LogLevel = "error"
	cfg.Logger = "zap"
	// Loopback and LAN clusters: a 100 ms heartbeat and 1 s election keep
	// failover quick while tolerating a busy 2-core machine.
	cfg.TickMs = 100
	cfg.ElectionMs = 1000
	// Compact history hourly: watches only need recent revisions.
	cfg.AutoCompactionMode = "periodic"
	cfg.AutoCompactionRetention = "1h"
	cfg.QuotaBackendBytes = 8 << 30
	// Room for the group commit's merged transactions (EtcdKV).
	cfg.MaxTxnOps = 2048
	if c.CertFile != "" {
		tls := transport.TLSInfo{CertFile: c.CertFile, KeyFile: c.KeyFile, TrustedCAFile: c.CAFile, ClientCertAuth: true}
		cfg.PeerTLSInfo, cfg.ClientTLSInfo = tls, tls
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster: start etcd member %s: %w", c.Name, err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("cluster: etcd member %s: %w", c.Name, err)
	case <-time.After(60 * time.Second):
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("cluster: etcd member %s not ready after 60s (are the other founding members up? initial cluster %s)", c.Name, c.InitialCluster)
	}
}

// ClientURLsFromInitial derives client URLs from "name=peerURL" pairs by
// the dev-cluster convention (client port = peer port - 1). Operators with
// other layouts pass --meta-endpoints.
func ClientURLsFromInitial(initial string) []string {
	var out []string
	for _, m := range strings.Split(initial, ",") {
		_, u, ok := strings.Cut(m, "=")
		if !ok {
			continue
		}
		pu, err := url.Parse(u)
		if err != nil {
			continue
		}
		var port int
		fmt.Sscanf(pu.Port(), "%d", &port)
		out = append(out, fmt.Sprintf("%s://%s:%d", pu.Scheme, pu.Hostname(), port-1))
	}
	return out
}
