package extent

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/terrace-storage/terrace/internal/device"
)

func benchStore(b *testing.B) *Store {
	d, err := device.Open("n1/ssd0", device.Spec{Tier: "ssd", Path: filepath.Join(b.TempDir(), "d"), Capacity: 64 << 30})
	if err != nil {
		b.Fatal(err)
	}
	return NewStore(d)
}

// BenchmarkAppend measures encode + append (+ fsync per op when synced),
// i.e. one replica's share of a small PUT.
func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{4 << 10, 1 << 20} {
		for _, sync := range []bool{false, true} {
			b.Run(fmt.Sprintf("size=%d/sync=%v", size, sync), func(b *testing.B) {
				s := benchStore(b)
				payload := make([]byte, size)
				b.SetBytes(int64(size))
				var id uint64 = 1
				s.Create(id)
				var off int64
				for i := 0; i < b.N; i++ {
					if off > 64<<20 {
						id++
						s.Create(id)
						off = 0
					}
					enc := Encode(nil, payload)
					if err := s.Append(id, off, enc); err != nil {
						b.Fatal(err)
					}
					if sync {
						if err := s.Sync(id); err != nil {
							b.Fatal(err)
						}
					}
					off += int64(len(enc))
				}
			})
		}
	}
}

// BenchmarkRead measures a verified read of a whole extent (page cache hot).
func BenchmarkRead(b *testing.B) {
	for _, size := range []int{4 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			s := benchStore(b)
			s.Create(1)
			payload := make([]byte, size)
			enc := Encode(nil, payload)
			const n = 64
			for i := 0; i < n; i++ {
				s.Append(1, int64(i*len(enc)), enc)
			}
			b.SetBytes(int64(size))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				off := int64((i % n) * len(enc))
				if _, err := s.Read(1, off, int64(size), 0, int64(size)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
