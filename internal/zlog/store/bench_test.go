package store

import (
	"sync/atomic"
	"testing"
)

// BenchmarkWrite4KiB: durable 4 KiB entries into one replica from
// parallel writers (b.SetParallelism); every Write returns after its
// group commit's fsync.
func BenchmarkWrite4KiB(b *testing.B) {
	for _, par := range []int{1, 16, 64} {
		b.Run(map[int]string{1: "writers=2", 16: "writers=32", 64: "writers=128"}[par], func(b *testing.B) {
			s := openStore(b, b.TempDir(), 0)
			defer s.Close()
			data := make([]byte, 4096)
			var next atomic.Uint64
			b.SetBytes(4096)
			b.SetParallelism(par)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					pos := next.Add(1)
					p, r := s.Begin(dev, k0, pos, 1, KindData, tok(int(pos)), Normal)
					if p == nil {
						b.Errorf("begin: %+v", r)
						return
					}
					if err := p.Write(data); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			st := s.metrics
			_ = st
		})
	}
}

// BenchmarkRead4KiB: reads of sealed entries (page cache).
func BenchmarkRead4KiB(b *testing.B) {
	s := openStore(b, b.TempDir(), 0)
	defer s.Close()
	data := make([]byte, 4096)
	const n = 1000
	for pos := uint64(0); pos < n; pos++ {
		p, _ := s.Begin(dev, k0, pos, 1, KindData, tok(int(pos)), Normal)
		if err := p.Write(data); err != nil {
			b.Fatal(err)
		}
	}
	s.Seal(dev, k0, 2)
	b.SetBytes(4096)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r := s.Read(dev, k0, uint64(i%n), 2, 0); r.Status != OK {
			b.Fatal(r)
		}
	}
}
