package extent

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/terrace-storage/terrace/internal/device"
)

func dirStore(t testing.TB, capacity int64) (*Store, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "dev")
	d, err := device.Open("n1/ssd0", device.Spec{Tier: "ssd", Path: dir, Capacity: capacity})
	if err != nil {
		t.Fatal(err)
	}
	return NewStore(d), dir
}

func memStore(t testing.TB, capacity int64) *Store {
	t.Helper()
	d, err := device.Open("n1/mem0", device.Spec{Tier: "mem", Capacity: capacity})
	if err != nil {
		t.Fatal(err)
	}
	return NewStore(d)
}

func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// appendExtent encodes and appends payload at the end of egroup id and
// returns the extent's file offset.
func appendExtent(t testing.TB, s *Store, id uint64, payload []byte) int64 {
	t.Helper()
	off, err := s.Size(id)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Append(id, off, Encode(nil, payload)); err != nil {
		t.Fatal(err)
	}
	return off
}

func TestEncodeLayout(t *testing.T) {
	for _, n := range []int{0, 1, SliceSize - 1, SliceSize, SliceSize + 1, 3*SliceSize + 17} {
		p := randBytes(uint64(n), n)
		enc := Encode(nil, p)
		if int64(len(enc)) != EncodedLen(int64(n)) {
			t.Errorf("len(Encode(%d bytes)) = %d, EncodedLen says %d", n, len(enc), EncodedLen(int64(n)))
		}
		if ScanValid(enc) != int64(len(enc)) {
			t.Errorf("ScanValid(Encode(%d bytes)) = %d, want %d", n, ScanValid(enc), len(enc))
		}
		got, err := decodeSlices(append([]byte(nil), enc...), 0, int64(n))
		if err != nil || !bytes.Equal(got, p) {
			t.Errorf("decode(Encode(%d bytes)): %v", n, err)
		}
	}
	// Two extents back to back scan as one valid run; a torn tail stops it.
	a, b := Encode(nil, randBytes(1, 100)), Encode(nil, randBytes(2, SliceSize+5))
	both := append(append([]byte(nil), a...), b...)
	if ScanValid(both) != int64(len(both)) {
		t.Fatal("two extents do not scan as valid")
	}
	if v := ScanValid(both[:len(both)-1]); v != int64(len(a)+SliceSize+HeaderSize) {
		t.Fatalf("torn tail: ScanValid = %d", v)
	}
	if EncodedLen(-5) != 0 {
		t.Fatal("EncodedLen of a negative length")
	}
}

func TestStoreReadRanges(t *testing.T) {
	for name, s := range map[string]*Store{"dir": func() *Store { s, _ := dirStore(t, 1<<30); return s }(), "mem": memStore(t, 1<<30)} {
		t.Run(name, func(t *testing.T) {
			const id = 0x1234
			if err := s.Create(id); err != nil {
				t.Fatal(err)
			}
			// Extents of awkward lengths, so that ranges cross slice and
			// extent boundaries at every position.
			lens := []int{1, 100, SliceSize, SliceSize + 1, 3*SliceSize + 777, 5}
			var offs []int64
			var payloads [][]byte
			for i, n := range lens {
				p := randBytes(uint64(i+1), n)
				offs = append(offs, appendExtent(t, s, id, p))
				payloads = append(payloads, p)
			}
			r := rand.New(rand.NewPCG(3, 3))
			for i, p := range payloads {
				n := int64(len(p))
				cases := [][2]int64{{0, n}, {0, 1}, {n - 1, n}, {n / 2, n}}
				if n > SliceSize {
					cases = append(cases, [2]int64{SliceSize - 1, SliceSize + 1}, [2]int64{SliceSize, SliceSize}, [2]int64{SliceSize, n})
				}
				for k := 0; k < 20; k++ {
					from := r.Int64N(n + 1)
					cases = append(cases, [2]int64{from, from + r.Int64N(n-from+1)})
				}
				for _, c := range cases {
					got, err := s.Read(id, offs[i], n, c[0], c[1])
					if err != nil {
						t.Fatalf("extent %d read [%d,%d): %v", i, c[0], c[1], err)
					}
					if !bytes.Equal(got, p[c[0]:c[1]]) {
						t.Fatalf("extent %d read [%d,%d): wrong bytes", i, c[0], c[1])
					}
				}
			}
			// Out-of-range reads are errors, not panics or short data.
			for _, c := range [][2]int64{{-1, 5}, {0, int64(lens[1]) + 1}, {5, 4}} {
				if _, err := s.Read(id, offs[1], int64(lens[1]), c[0], c[1]); err == nil {
					t.Errorf("read [%d,%d) of a %d-byte extent succeeded", c[0], c[1], lens[1])
				}
			}
			// An extent record pointing past the end of the file is corrupt.
			size, _ := s.Size(id)
			if _, err := s.Read(id, size-10, 100, 0, 100); !errors.Is(err, ErrCorrupt) {
				t.Errorf("read past end of file: %v", err)
			}
			// A wrong extent length (stale metadata) fails at the slice it
			// contradicts.
			short := int64(lens[4]) - 1
			if _, err := s.Read(id, offs[4], short, short-10, short); !errors.Is(err, ErrCorrupt) {
				t.Errorf("read with a too-short extent length: %v", err)
			}
			long := int64(lens[4]) + 1
			if _, err := s.Read(id, offs[4], long, 0, long); !errors.Is(err, ErrCorrupt) {
				t.Errorf("read with a wrong extent length: %v", err)
			}
			if err := s.Verify(id, size); err != nil {
				t.Fatalf("verify: %v", err)
			}
		})
	}
}

func TestAppendOnly(t *testing.T) {
	s := memStore(t, 1<<30)
	s.Create(1)
	p := Encode(nil, []byte("first"))
	if err := s.Append(1, 0, p); err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{0, 3, int64(len(p)) + 1} {
		if err := s.Append(1, off, p); !errors.Is(err, ErrAppendOnly) {
			t.Errorf("append at %d of a %d-byte file: %v, want ErrAppendOnly", off, len(p), err)
		}
	}
	if sz, _ := s.Size(1); sz != int64(len(p)) {
		t.Fatalf("refused appends changed the size to %d", sz)
	}
	if err := s.Append(99, 0, p); !errors.Is(err, device.ErrNotExist) {
		t.Fatalf("append to a missing egroup: %v", err)
	}
}

func TestAppendOnFullDeviceLeavesNoPartialSlice(t *testing.T) {
	s := memStore(t, 3*SliceSize)
	s.Create(7)
	first := Encode(nil, randBytes(1, SliceSize))
	if err := s.Append(7, 0, first); err != nil {
		t.Fatal(err)
	}
	err := s.Append(7, int64(len(first)), Encode(nil, randBytes(2, 2*SliceSize)))
	if !errors.Is(err, device.ErrFull) {
		t.Fatalf("append past capacity: %v", err)
	}
	if sz, _ := s.Size(7); sz != int64(len(first)) {
		t.Fatalf("size %d after a failed append, want %d", sz, len(first))
	}
	if err := s.Verify(7, int64(len(first))); err != nil {
		t.Fatal(err)
	}
	// The egroup stays appendable at its old end.
	if err := s.Append(7, int64(len(first)), Encode(nil, []byte("small"))); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyFindsCorruption(t *testing.T) {
	s, dir := dirStore(t, 1<<30)
	s.Create(0xab)
	p := randBytes(5, 2*SliceSize+10)
	appendExtent(t, s, 0xab, p)
	size, _ := s.Size(0xab)
	path := filepath.Join(dir, FileName(0xab))
	b, _ := os.ReadFile(path)
	b[SliceSize+HeaderSize+HeaderSize+7] ^= 1 // inside the second slice
	os.WriteFile(path, b, 0o644)
	err := s.Verify(0xab, size)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("verify of a flipped bit: %v", err)
	}
	// Reads of the damaged slice fail; reads of the other slices succeed.
	if _, err := s.Read(0xab, 0, int64(len(p)), SliceSize, SliceSize+10); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read of the damaged slice: %v", err)
	}
	if got, err := s.Read(0xab, 0, int64(len(p)), 0, 10); err != nil || !bytes.Equal(got, p[:10]) {
		t.Fatalf("read of an intact slice: %v", err)
	}
	if got, err := s.Read(0xab, 0, int64(len(p)), 2*SliceSize, 2*SliceSize+10); err != nil || !bytes.Equal(got, p[2*SliceSize:]) {
		t.Fatalf("read of the last slice: %v", err)
	}
	if err := s.Verify(0xab, size+1); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("verify past the end: %v", err)
	}
}

func TestRecover(t *testing.T) {
	s, _ := dirStore(t, 1<<30)
	enc := Encode(nil, randBytes(9, 1000))
	setup := func(id uint64, b []byte) {
		s.Create(id)
		if err := s.Append(id, 0, b); err != nil {
			t.Fatal(err)
		}
	}
	setup(1, enc)
	setup(2, append(append([]byte(nil), enc...), Encode(nil, []byte("unacknowledged"))...))
	setup(3, enc[:len(enc)-10])
	setup(4, append(append([]byte(nil), enc...), 0xde, 0xad))
	for _, c := range []struct {
		id        uint64
		committed int64
		want      RecoverResult
	}{
		{1, int64(len(enc)), Intact},
		{2, int64(len(enc)), Truncated},
		{3, int64(len(enc)), Damaged},
		{4, int64(len(enc)), Truncated},
		{5, 100, Missing},
		{1, 0, Truncated}, // a committed length of 0 empties the file
	} {
		res, err := s.Recover(c.id, c.committed)
		if err != nil || res != c.want {
			t.Errorf("Recover(%d, %d) = %v, %v; want %v", c.id, c.committed, res, err, c.want)
		}
		if sz, err := s.Size(c.id); err == nil && sz > c.committed {
			t.Errorf("egroup %d is %d bytes after recovery, committed %d", c.id, sz, c.committed)
		}
	}
	if err := s.Verify(2, int64(len(enc))); err != nil {
		t.Errorf("truncated replica: %v", err)
	}
	if res, err := s.Recover(2, -1); err == nil && res != Damaged {
		t.Errorf("Recover with a negative committed length: %v, %v", res, err)
	}
	if s.Device().Failed() {
		t.Fatal("recovery marked the device failed")
	}
	for _, r := range []RecoverResult{Intact, Truncated, Damaged, Missing} {
		if r.String() == "" {
			t.Errorf("RecoverResult %d has no name", r)
		}
	}
}

func TestListRemoveAndHandles(t *testing.T) {
	s, _ := dirStore(t, 1<<30)
	// More egroups than cached handles: eviction must not lose data.
	const n = maxOpenFiles + 40
	for id := uint64(1); id <= n; id++ {
		s.Create(id)
		appendExtent(t, s, id, randBytes(id, 50))
	}
	for id := uint64(1); id <= n; id++ {
		got, err := s.Read(id, 0, 50, 0, 50)
		if err != nil || !bytes.Equal(got, randBytes(id, 50)) {
			t.Fatalf("egroup %d after eviction: %v", id, err)
		}
	}
	ids, err := s.List()
	if err != nil || len(ids) != n {
		t.Fatalf("list: %d ids, %v", len(ids), err)
	}
	if err := s.Remove(3); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Size(3); !errors.Is(err, device.ErrNotExist) {
		t.Fatalf("size of removed egroup: %v", err)
	}
	if ids, _ := s.List(); len(ids) != n-1 {
		t.Fatalf("list after remove: %d", len(ids))
	}
	for _, c := range []struct {
		name string
		id   uint64
		ok   bool
	}{
		{FileName(0xfedcba9876543210), 0xfedcba9876543210, true},
		{"eg/00/zz.eg", 0, false},
		{".terrace-device", 0, false},
		{"eg/01/0000000000000001.tmp", 0, false},
	} {
		id, ok := parseFileName(c.name)
		if ok != c.ok || (ok && id != c.id) {
			t.Errorf("parseFileName(%q) = %x, %v", c.name, id, ok)
		}
	}
	// Create over an existing replica starts it afresh.
	s.Create(5)
	if sz, _ := s.Size(5); sz != 0 {
		t.Fatalf("re-created egroup has %d bytes", sz)
	}
}
