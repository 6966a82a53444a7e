package metarange

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"

	"github.com/terrace-storage/terrace/internal/cluster"
	"github.com/terrace-storage/terrace/internal/devcluster"
	"github.com/terrace-storage/terrace/internal/meta"
)

// BenchmarkSmallPutCommit measures the metadata commit of a small PUT
// (create-if-absent of an object record and a put of its extent record,
// ~200 and ~100 bytes) from 16 concurrent writers against a 3-member
// store in this process, every member fsyncing to its own directory:
//
//   - etcd: three embedded etcd members and the server's EtcdKV (group
//     commit, writes through the node's own member), as a node runs them;
//   - metarange: three members of this package.
//
// "leader" sends every commit through the leader's member, "follower"
// through a follower's (the proposal is forwarded). cpu-µs/op is the
// process's user+system CPU per commit, so it sums the three members,
// as the cluster benchmark sums the three node processes.
func BenchmarkSmallPutCommit(b *testing.B) {
	for _, store := range []string{"etcd", "metarange"} {
		for _, via := range []string{"leader", "follower"} {
			b.Run(store+"/"+via, func(b *testing.B) {
				var kv meta.KV
				if store == "etcd" {
					kv = openEtcd(b, via == "leader")
				} else {
					kv = openMetarange(b, via == "leader")
				}
				runCommits(b, kv)
			})
		}
	}
}

func runCommits(b *testing.B, kv meta.KV) {
	ctx := context.Background()
	obj := make([]byte, 200)
	ext := make([]byte, 100)
	for i := range obj {
		obj[i] = byte('a' + i%26)
	}
	copy(ext, obj)
	var n atomic.Int64
	commit := func() error {
		i := n.Add(1)
		var t meta.Txn
		key := fmt.Appendf(nil, "obj/bench/%012d", i)
		t.If(key, 0)
		t.Put(key, obj)
		t.Put(fmt.Appendf(nil, "ext/%016x", i), ext)
		_, err := kv.Commit(ctx, &t)
		return err
	}
	// Warm up: connections, the leader's first entries.
	for range 200 {
		if err := commit(); err != nil {
			b.Fatal(err)
		}
	}
	before := cpuTime()
	start := time.Now()
	b.ResetTimer()
	b.SetParallelism(8) // 16 writers on 2 cores, as the cluster benchmark's clients
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := commit(); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	elapsed := time.Since(start)
	b.ReportMetric(float64((cpuTime()-before).Microseconds())/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "commits/s")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func openMetarange(b *testing.B, viaLeader bool) meta.KV {
	tr := startRange(b, 3, 100*time.Millisecond)
	lead := tr.waitLeader(b)
	if viaLeader {
		return tr.r[lead]
	}
	return tr.r[tr.follower(b)]
}

// openEtcd starts three etcd members as the server does (cluster.StartMember)
// and returns the server's EtcdKV on the leader's or a follower's node.
func openEtcd(b *testing.B, viaLeader bool) meta.KV {
	const n = 3
	base, err := devcluster.FreeBase(23000, 2*n, 10)
	if err != nil {
		b.Fatal(err)
	}
	ports := make([]int, 2*n) // peer and client ports
	for i := range ports {
		ports[i] = base + i
	}
	var initial, clients []string
	for i := range n {
		initial = append(initial, fmt.Sprintf("m%d=http://127.0.0.1:%d", i, ports[i]))
		clients = append(clients, fmt.Sprintf("http://127.0.0.1:%d", ports[n+i]))
	}
	members := make([]*embed.Etcd, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			members[i], errs[i] = cluster.StartMember(cluster.MemberConfig{Name: fmt.Sprintf("m%d", i), DataDir: b.TempDir(),
				PeerURL: fmt.Sprintf("http://127.0.0.1:%d", ports[i]), ClientURL: clients[i], InitialCluster: strings.Join(initial, ",")})
		}()
	}
	wg.Wait()
	for i, m := range members {
		if errs[i] != nil {
			b.Fatal(errs[i])
		}
		b.Cleanup(m.Close)
	}
	var node *embed.Etcd
	deadline := time.Now().Add(30 * time.Second)
	for node == nil {
		lead := members[0].Server.Leader()
		for _, m := range members {
			if lead != 0 && (m.Server.MemberID() == lead) == viaLeader {
				node = m
			}
		}
		if time.Now().After(deadline) {
			b.Fatal("no etcd leader within 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: clients, DialTimeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	kv := cluster.NewEtcdKV(c)
	kv.ReadLocally(v3client.New(node.Server))
	kv.WriteLocally(func() bool { return node.Server.Leader() != 0 })
	b.Cleanup(func() { kv.Close() })
	return kv
}
