package meta

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
)

// BenchmarkCommit measures durable (fsynced) metadata commits: serial, and
// from many goroutines where group commit shares WAL syncs.
func BenchmarkCommit(b *testing.B) {
	for _, par := range []int{1, 16, 64} {
		for _, keys := range []int{1, 5} {
			b.Run(fmt.Sprintf("writers=%d/keys=%d", par, keys), func(b *testing.B) {
				kv, err := OpenPebble(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				defer kv.Close()
				val := make([]byte, 200)
				var ctr atomic.Int64
				b.SetParallelism(par)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						i := ctr.Add(1)
						var t Txn
						for k := 0; k < keys; k++ {
							t.Put([]byte(fmt.Sprintf("o/bench\x00%d-%d", i, k)), val)
						}
						if _, err := kv.Commit(context.Background(), &t); err != nil {
							b.Fatal(err)
						}
					}
				})
			})
		}
	}
}

func BenchmarkGet(b *testing.B) {
	kv, err := OpenPebble(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer kv.Close()
	for i := 0; i < 1000; i++ {
		var t Txn
		t.Put([]byte(fmt.Sprintf("o/k%04d", i)), make([]byte, 200))
		kv.Commit(context.Background(), &t)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := kv.Get(context.Background(), []byte(fmt.Sprintf("o/k%04d", i%1000))); err != nil {
			b.Fatal(err)
		}
	}
}
