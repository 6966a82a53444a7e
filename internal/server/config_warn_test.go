package server

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// A node that runs clustered without TLS says loudly at start-up that the
// cluster trusts its network; a TLS cluster and a single node do not.
func TestStartupWarnsOfPlainTextCluster(t *testing.T) {
	warnings := func(c Config) string {
		var b bytes.Buffer
		warnInsecure(c, slog.New(slog.NewTextHandler(&b, nil)))
		return b.String()
	}
	plain := Config{InitialCluster: "n1=http://10.0.0.1:2380", RPCAddress: "10.0.0.1:7000", ClusterSecret: "0123456789abcdef"}
	plain.EnsureDefaults()
	out := warnings(plain)
	for _, want := range []string{"level=WARN", "INSECURE", "without TLS", "replay", "5 minutes", "etcd", "no authentication"} {
		if !strings.Contains(out, want) {
			t.Errorf("plain-text cluster warning lacks %q:\n%s", want, out)
		}
	}
	ext := Config{MetaEndpoints: []string{"http://10.0.0.9:2379"}, RPCAddress: "10.0.0.4:7000"}
	ext.EnsureDefaults()
	if !strings.Contains(warnings(ext), "without TLS") {
		t.Errorf("a node on an external plain-text etcd does not warn")
	}
	tls := plain
	tls.TLSCert, tls.TLSKey, tls.TLSCA = "n1.pem", "n1-key.pem", "ca.pem"
	if out := warnings(tls); out != "" {
		t.Errorf("TLS cluster warns:\n%s", out)
	}
	single := Config{}
	single.EnsureDefaults()
	if out := warnings(single); out != "" {
		t.Errorf("single node on loopback warns:\n%s", out)
	}
	demo := Config{S3Address: "0.0.0.0:9000", InsecureDefaultCredentials: true}
	demo.EnsureDefaults()
	if out := warnings(demo); !strings.Contains(out, "published demo default") {
		t.Errorf("demo password off loopback does not warn:\n%s", out)
	}
}
