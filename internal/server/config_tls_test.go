package server

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/terrace-storage/terrace/internal/tlsconf"
)

// docs/security.md: with TLS every etcd URL is https://, --initial-cluster
// and --meta-endpoints included, not only this node's own peer and client
// URLs.
func TestTLSClusterRefusesHTTPMetaURLs(t *testing.T) {
	dir := t.TempDir()
	if err := tlsconf.DevCA(dir, "n1"); err != nil {
		t.Fatal(err)
	}
	base := func() Config {
		return Config{DataDir: t.TempDir(), NodeID: "n4", RPCAddress: "10.0.0.4:7000", ClusterSecret: "0123456789abcdef0123",
			MetaEndpoints: []string{"https://10.0.0.1:2379"}, InitialCluster: "n1=https://10.0.0.1:2380",
			TLSCert: filepath.Join(dir, "n1.pem"), TLSKey: filepath.Join(dir, "n1-key.pem"), TLSCA: filepath.Join(dir, "ca.pem")}
	}
	c := base()
	c.EnsureDefaults()
	if _, err := c.Validate(); err != nil {
		t.Fatalf("https:// TLS cluster config: %v", err)
	}
	cases := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"reviewer's config", func(c *Config) {
			c.MetaEndpoints, c.InitialCluster = []string{"http://10.0.0.1:2379"}, "n1=http://10.0.0.1:2380"
		}, "https://"},
		{"http meta endpoint", func(c *Config) {
			c.MetaEndpoints = []string{"https://10.0.0.1:2379", "http://10.0.0.2:2379"}
		}, "--meta-endpoints"},
		{"scheme-less meta endpoint", func(c *Config) { c.MetaEndpoints = []string{"10.0.0.1:2379"} }, "--meta-endpoints"},
		{"http founding member", func(c *Config) {
			c.InitialCluster = "n1=https://10.0.0.1:2380,n2=http://10.0.0.2:2380"
		}, "member n2"},
		{"malformed founding member", func(c *Config) { c.InitialCluster = "n1=https://10.0.0.1:2380,n2" }, "name=peerURL"},
		{"http advertised peer URL", func(c *Config) {
			c.NodeID, c.EtcdPeerURL, c.EtcdClientURL = "n1", "https://10.0.0.1:2380", "https://10.0.0.1:2379"
			c.EtcdAdvertisePeerURL = "http://192.0.2.1:2380"
		}, "--etcd-advertise-peer-url"},
		{"http own client URL", func(c *Config) {
			c.NodeID, c.EtcdPeerURL, c.EtcdClientURL = "n1", "https://10.0.0.1:2380", "http://10.0.0.1:2379"
		}, "--etcd-client-url"},
	}
	for _, tc := range cases {
		c := base()
		tc.mod(&c)
		c.EnsureDefaults()
		_, err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate: %v, want an error naming %s", tc.name, err, tc.want)
		}
	}
	// Without TLS, http:// is what a plain-text cluster uses.
	c = base()
	c.TLSCert, c.TLSKey, c.TLSCA = "", "", ""
	c.MetaEndpoints, c.InitialCluster = []string{"http://10.0.0.1:2379"}, "n1=http://10.0.0.1:2380"
	c.EnsureDefaults()
	if _, err := c.Validate(); err != nil {
		t.Errorf("plain-text cluster config: %v", err)
	}
}
