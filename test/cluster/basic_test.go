package cluster

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/terrace-storage/terrace/internal/cluster"
	"github.com/terrace-storage/terrace/internal/cluster/rpcpb"
)

// TestThreeNodeCluster: objects written with a 3-replica vector land on
// three distinct nodes, and every node's admin API returns identical
// bytes; then the replica RPC port refuses peers with a wrong or missing
// cluster secret (one cluster serves both, to keep the package quick).
func TestThreeNodeCluster(t *testing.T) {
	c := startCluster(t, 3, 27100, "")
	const seed = 1
	buckets := map[string]string{"three-any": "any=3", "three-tiered": "ssd=1,hdd=2"}
	for b, v := range buckets {
		createBucket(t, c.Nodes[0].Admin, b, v)
	}
	type obj struct{ bucket, key string }
	var objs []obj
	for b := range buckets {
		for i := 0; i < 12; i++ {
			objs = append(objs, obj{b, fmt.Sprintf("obj-%02d", i)})
		}
	}
	// Write through every node in turn; sizes span one to several extents
	// (4 MiB), so multi-extent objects are covered.
	ctx, cancel := ctxT(2 * time.Minute)
	defer cancel()
	for i, o := range objs {
		data := content(seed, o.bucket+"/"+o.key, 1, 9<<20)
		if err := putObject(ctx, c.Nodes[i%3].Admin, o.bucket, o.key, data); err != nil {
			t.Fatalf("put %s/%s via %s: %v", o.bucket, o.key, c.Nodes[i%3].ID, err)
		}
	}

	t.Run("replicas on three distinct nodes", func(t *testing.T) {
		extents := 0
		for i, o := range objs {
			loc, err := locate(ctx, c.Nodes[(i+1)%3].Admin, o.bucket, o.key)
			if err != nil {
				t.Fatalf("locate %s/%s: %v", o.bucket, o.key, err)
			}
			if len(loc.Extents) == 0 && loc.Size > 0 {
				t.Fatalf("%s/%s: no extents", o.bucket, o.key)
			}
			for _, x := range loc.Extents {
				extents++
				if x.Error != "" {
					t.Errorf("%s/%s extent %d: %s", o.bucket, o.key, x.Extent, x.Error)
					continue
				}
				nodes := map[string]bool{}
				tiers := map[string]int{}
				for _, r := range x.Replicas {
					if r.Bad {
						t.Errorf("%s/%s egroup %d: bad replica on %s", o.bucket, o.key, x.Egroup, r.Device)
					}
					nodes[string(r.Node)] = true
					tiers[string(r.Tier)]++
				}
				if len(x.Replicas) != 3 || len(nodes) != 3 {
					t.Errorf("%s/%s egroup %d: replicas %+v: want 3 on 3 distinct nodes", o.bucket, o.key, x.Egroup, x.Replicas)
				}
				if buckets[o.bucket] == "ssd=1,hdd=2" && (tiers["ssd"] != 1 || tiers["hdd"] != 2) {
					t.Errorf("%s/%s egroup %d: tiers %v, want ssd=1 hdd=2", o.bucket, o.key, x.Egroup, tiers)
				}
			}
		}
		t.Logf("%d objects, %d extents: every extent on 3 distinct nodes", len(objs), extents)
	})

	t.Run("identical bytes from every node", func(t *testing.T) {
		for _, o := range objs {
			want := content(seed, o.bucket+"/"+o.key, 1, 9<<20)
			for _, n := range c.Nodes {
				got, err := getObject(ctx, n.Admin, o.bucket, o.key)
				if err != nil {
					t.Fatalf("get %s/%s from %s: %v", o.bucket, o.key, n.ID, err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("get %s/%s from %s: %s", o.bucket, o.key, n.ID, firstDiff(got, want))
				}
			}
		}
	})

	t.Run("wrong secret refused", func(t *testing.T) {
		// A real replica to ask for: the first extent of the first object.
		loc, err := locate(ctx, c.Nodes[0].Admin, objs[0].bucket, objs[0].key)
		if err != nil || len(loc.Extents) == 0 {
			t.Fatalf("locate: %v %+v", err, loc)
		}
		x := loc.Extents[0]
		r := x.Replicas[0]
		target := c.node(string(r.Node))
		req := &rpcpb.ReadRequest{Ref: &rpcpb.ReplicaRef{Device: string(r.Device), Egroup: x.Egroup},
			ExtentOffset: x.EgroupOff, ExtentLength: x.Length, From: 0, To: x.Length}
		read := func(cc *grpc.ClientConn, ctx context.Context) ([]byte, error) {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			resp, err := rpcpb.NewReplicaClient(cc).Read(ctx, req)
			if err != nil {
				return nil, err
			}
			return resp.Data, nil
		}
		want := content(seed, objs[0].bucket+"/"+objs[0].key, 1, 9<<20)[:x.Length]

		// Control: the cluster secret reads the replica.
		good, err := cluster.DialPeer(target.RPC, "n-test", []byte(c.Secret), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer good.Close()
		got, err := read(good, ctx)
		if err != nil {
			t.Fatalf("read with the cluster secret: %v", err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("read with the cluster secret: %s", firstDiff(got, want))
		}

		expectUnauth := func(name string, err error) {
			t.Helper()
			if status.Code(err) != codes.Unauthenticated {
				t.Errorf("%s: got %v (code %s), want Unauthenticated", name, err, status.Code(err))
			}
		}
		// A wrong secret, for reads and for a destructive call.
		bad, err := cluster.DialPeer(target.RPC, "n1", []byte("not-the-cluster-secret-0123456789"), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer bad.Close()
		_, err = read(bad, ctx)
		expectUnauth("read with a wrong secret", err)
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = rpcpb.NewReplicaClient(bad).Remove(rctx, &rpcpb.RemoveRequest{Ref: req.Ref})
		rcancel()
		expectUnauth("remove with a wrong secret", err)

		// No authentication metadata at all.
		plain, err := grpc.NewClient(target.RPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer plain.Close()
		_, err = read(plain, ctx)
		expectUnauth("read without auth metadata", err)

		// Hand-made tokens: a fresh one with the right secret passes (so
		// the construction is right), the same MAC 10 minutes old (a
		// replayed capture) and a MAC over another node's name do not.
		token := func(node string, at time.Time) context.Context {
			ts := strconv.FormatInt(at.UnixNano(), 10)
			h := hmac.New(sha256.New, []byte(c.Secret))
			h.Write([]byte(rpcpb.Replica_Read_FullMethodName + "|" + node + "|" + ts))
			return metadata.AppendToOutgoingContext(ctx, "x-terrace-node", node, "x-terrace-time", ts, "x-terrace-mac", hex.EncodeToString(h.Sum(nil)))
		}
		if _, err := read(plain, token("n1", time.Now())); err != nil {
			t.Fatalf("hand-made fresh token refused: %v", err)
		}
		_, err = read(plain, token("n1", time.Now().Add(-10*time.Minute)))
		expectUnauth("read with a replayed (old) token", err)
		forged := metadata.Join(metadata.Pairs("x-terrace-node", "n2"))
		fctx := token("n1", time.Now())
		md, _ := metadata.FromOutgoingContext(fctx)
		md = md.Copy()
		md.Set("x-terrace-node", forged.Get("x-terrace-node")...)
		_, err = read(plain, metadata.NewOutgoingContext(ctx, md))
		expectUnauth("read with a MAC for another node name", err)

		// The replica is untouched: it still reads back.
		got, err = read(good, ctx)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("replica after refused calls: %v", err)
		}
	})
}
