package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/terrace-storage/terrace/internal/cluster"
	"github.com/terrace-storage/terrace/internal/cluster/rpcpb"
	"github.com/terrace-storage/terrace/internal/devcluster"
	"github.com/terrace-storage/terrace/internal/tlsconf"
)

// TestTLSCluster: `dev cluster --tls` runs every listener with TLS. Real
// S3 and admin clients that trust the cluster CA work through every node
// (data crosses nodes over mutual-TLS replica RPC, metadata over
// mutual-TLS etcd); a plain-text client is refused on every port, and a
// TLS client without a cluster certificate is refused on the node-to-node
// ports.
func TestTLSCluster(t *testing.T) {
	c := startClusterWith(t, 3, 27700, "", func(o *devcluster.Options) { o.TLS = true })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	trust, err := tlsconf.ClientTrusting(c.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := c.AdminClient(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}

	// Every node sees every other node up (heartbeats over TLS etcd).
	deadline := time.Now().Add(60 * time.Second)
	for _, n := range c.Nodes {
		for {
			var st struct {
				Cluster *struct {
					Nodes []struct {
						Up bool `json:"up"`
					} `json:"nodes"`
				} `json:"cluster"`
			}
			up := 0
			if resp, err := admin.Get("https://" + n.Admin + "/v1/status"); err == nil {
				json.NewDecoder(resp.Body).Decode(&st)
				resp.Body.Close()
				if st.Cluster != nil {
					for _, m := range st.Cluster.Nodes {
						if m.Up {
							up++
						}
					}
				}
			}
			if up == len(c.Nodes) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s sees %d of %d nodes up over TLS", n.ID, up, len(c.Nodes))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	// S3 through each node, over HTTPS, trusting the cluster CA.
	s3c := func(n *devcluster.Node) *s3.Client {
		return s3.New(s3.Options{
			Region: "us-east-1", BaseEndpoint: aws.String("https://" + n.S3), UsePathStyle: true,
			Credentials: credentials.NewStaticCredentialsProvider(devcluster.AccessKey, devcluster.SecretKey, ""),
			HTTPClient:  &http.Client{Transport: &http.Transport{TLSClientConfig: trust}},
		})
	}
	bucket := "tls-bucket"
	if _, err := s3c(c.Nodes[0]).CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &bucket}); err != nil {
		t.Fatalf("create bucket over https: %v", err)
	}
	for i, n := range c.Nodes {
		key := fmt.Sprintf("k%d", i)
		body := bytes.Repeat([]byte{byte('a' + i)}, 300<<10)
		if _, err := s3c(n).PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: bytes.NewReader(body)}); err != nil {
			t.Fatalf("put through %s: %v", n.ID, err)
		}
		// Read it through the next node: replicas may live anywhere.
		out, err := s3c(c.Nodes[(i+1)%len(c.Nodes)]).GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key})
		if err != nil {
			t.Fatalf("get %s: %v", key, err)
		}
		got, _ := io.ReadAll(out.Body)
		out.Body.Close()
		if !bytes.Equal(got, body) {
			t.Fatalf("%s: wrong bytes over TLS", key)
		}
	}

	n1 := c.Nodes[0]
	// Plain text is refused everywhere.
	plainHTTP := &http.Client{Timeout: 5 * time.Second}
	for name, addr := range map[string]string{"S3": n1.S3, "admin": n1.Admin} {
		resp, err := plainHTTP.Get("http://" + addr + "/")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "HTTPS") {
				t.Errorf("plain HTTP to the %s port: %d %q, want a refusal", name, resp.StatusCode, b)
			}
		}
	}
	etcdClient := strings.Replace(n1.RPC, fmt.Sprint(":", portOf(t, n1.RPC)), fmt.Sprint(":", portOf(t, n1.RPC)+1), 1)
	if resp, err := plainHTTP.Get("http://" + etcdClient + "/version"); err == nil {
		resp.Body.Close()
		t.Errorf("plain HTTP to the etcd client port answered %d", resp.StatusCode)
	}
	// TLS without a cluster certificate: etcd and the replica RPC refuse.
	anon := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: trust}}
	if resp, err := anon.Get("https://" + etcdClient + "/version"); err == nil {
		resp.Body.Close()
		t.Errorf("etcd served a client without a certificate: %d", resp.StatusCode)
	}
	ref := &rpcpb.ReadRequest{Ref: &rpcpb.ReplicaRef{Device: "n2/ssd0", Egroup: 1}, ExtentLength: 1, To: 1}
	for name, tc := range map[string]*tls.Config{"plain text": nil, "TLS without a certificate": trust} {
		cc, err := cluster.DialPeer(c.Nodes[1].RPC, "n-test", []byte(c.Secret), tc)
		if err != nil {
			t.Fatal(err)
		}
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = rpcpb.NewReplicaClient(cc).Read(rctx, ref)
		rcancel()
		cc.Close()
		if err == nil {
			t.Errorf("replica RPC over %s with the cluster secret: served", name)
		}
	}
	// Control: the node's own certificate passes.
	files := tlsconf.Files{CertFile: c.dir + "/tls/n1.pem", KeyFile: c.dir + "/tls/n1-key.pem", CAFile: c.CAFile}
	peer, err := files.PeerClient()
	if err != nil {
		t.Fatal(err)
	}
	cc, err := cluster.DialPeer(c.Nodes[1].RPC, "n1", []byte(c.Secret), peer)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = rpcpb.NewReplicaClient(cc).Read(rctx, ref)
	rcancel()
	if status.Code(err) == codes.Unavailable || status.Code(err) == codes.Unauthenticated {
		t.Errorf("replica RPC with a cluster certificate: %v", err)
	}
}

func portOf(t *testing.T, addr string) int {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	fmt.Sscan(p, &n)
	return n
}
