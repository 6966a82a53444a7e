package extent

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/terrace-storage/terrace/internal/device"
)

// FuzzDecodeSlices feeds arbitrary bytes to the two decoders that read
// what is on disk. Neither may panic; ScanValid returns a valid prefix;
// a successful decode is exactly the encoding of what it returned.
//
//	go test -fuzz FuzzDecodeSlices ./internal/extent
func FuzzDecodeSlices(f *testing.F) {
	f.Add([]byte{}, int64(0), int64(0))
	f.Add(Encode(nil, []byte("hello")), int64(0), int64(5))
	f.Add(Encode(nil, []byte("hello")), int64(0), int64(4))
	// Multi-slice extents are FuzzEncodeFlip's: a 64 KiB seed here makes
	// the engine's input minimisation crawl.
	f.Add(Encode(nil, randBytes(2, 70)), int64(1), int64(SliceSize+70))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 1}, int64(0), int64(1<<40))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0}, int64(-1), int64(-1))
	f.Add(Encode(nil, []byte("x")), int64(1<<62), int64(1<<62))
	f.Fuzz(func(t *testing.T, data []byte, first, extLen int64) {
		v := ScanValid(data)
		if v < 0 || v > int64(len(data)) {
			t.Fatalf("ScanValid = %d for %d bytes", v, len(data))
		}
		if ScanValid(data[:v]) != v {
			t.Fatalf("ScanValid prefix %d is not itself valid", v)
		}
		// decodeSlices verifies in place (its result aliases its input).
		out, err := decodeSlices(append([]byte(nil), data...), first, extLen)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decode error %v is not ErrCorrupt", err)
			}
			return
		}
		if first == 0 && !bytes.Equal(Encode(nil, out), data) {
			t.Fatalf("decoded %d bytes whose encoding differs from the input", len(out))
		}
		if len(data) > 0 && ScanValid(data) != int64(len(data)) {
			t.Fatalf("decodeSlices accepted bytes ScanValid rejects at %d", ScanValid(data))
		}
	})
}

// FuzzEncodeFlip encodes a payload, checks the round trip, then flips one
// byte of the encoding: a full decode must fail (CRC32C catches every
// single-byte error), and a verified Store.Read of any range must fail or
// return the original bytes — never different ones.
//
//	go test -fuzz FuzzEncodeFlip ./internal/extent
func FuzzEncodeFlip(f *testing.F) {
	f.Add(uint64(1), uint32(1), uint32(0), byte(1), uint32(0), uint32(1))
	f.Add(uint64(2), uint32(100), uint32(3), byte(0x80), uint32(0), uint32(100))              // length field
	f.Add(uint64(3), uint32(100), uint32(5), byte(0xff), uint32(10), uint32(20))              // checksum field
	f.Add(uint64(4), uint32(SliceSize+9), uint32(SliceSize+9), byte(4), uint32(0), uint32(5)) // 2nd header, read 1st slice
	f.Add(uint64(5), uint32(3*SliceSize), uint32(2*SliceSize+40), byte(0x10), uint32(SliceSize), uint32(3*SliceSize))
	s, err := device.Open("n1/mem0", device.Spec{Tier: "mem", Capacity: 1 << 40})
	if err != nil {
		f.Fatal(err)
	}
	st := NewStore(s)
	var ids atomic.Uint64
	f.Fuzz(func(t *testing.T, seed uint64, size uint32, pos uint32, mask byte, from, to uint32) {
		n := int64(size % (3*SliceSize + 100))
		payload := randBytes(seed, int(n))
		enc := Encode(nil, payload)
		if int64(len(enc)) != EncodedLen(n) || ScanValid(enc) != int64(len(enc)) {
			t.Fatalf("encoding of %d bytes: len %d, EncodedLen %d, ScanValid %d", n, len(enc), EncodedLen(n), ScanValid(enc))
		}
		if n == 0 {
			return
		}
		if got, err := decodeSlices(append([]byte(nil), enc...), 0, n); err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("round trip of %d bytes: %v", n, err)
		}
		if mask == 0 {
			mask = 1
		}
		p := int64(pos) % int64(len(enc))
		bad := append([]byte(nil), enc...)
		bad[p] ^= mask
		if got, err := decodeSlices(append([]byte(nil), bad...), 0, n); err == nil {
			t.Fatalf("flipping byte %d (mask %#x) went undetected (equal: %v)", p, mask, bytes.Equal(got, payload))
		}
		if v, sliceStart := ScanValid(bad), p/(SliceSize+HeaderSize)*(SliceSize+HeaderSize); v > sliceStart {
			t.Fatalf("ScanValid = %d runs past the damaged slice at %d", v, sliceStart)
		}
		id := ids.Add(1)
		if err := st.Create(id); err != nil {
			t.Fatal(err)
		}
		defer st.Remove(id)
		// The extent sits after a prefix so file offsets are not zero.
		prefix := Encode(nil, []byte("prefix"))
		if err := st.Append(id, 0, append(prefix, bad...)); err != nil {
			t.Fatal(err)
		}
		lo := int64(from) % (n + 1)
		hi := lo + int64(to)%(n-lo+1)
		got, err := st.Read(id, int64(len(prefix)), n, lo, hi)
		if err == nil && !bytes.Equal(got, payload[lo:hi]) {
			t.Fatalf("read [%d,%d) with byte %d flipped returned wrong bytes", lo, hi, p)
		}
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("read error %v is not ErrCorrupt", err)
		}
		if err := st.Verify(id, int64(len(prefix)+len(bad))); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Verify missed the flipped byte: %v", err)
		}
	})
}

// FuzzRecover writes arbitrary bytes as a replica file on a real directory
// device and recovers it to an arbitrary committed length. Recovery never
// panics, never fails the device, leaves at most the committed length,
// keeps the committed prefix intact and classifies the file correctly.
//
//	go test -fuzz FuzzRecover ./internal/extent
func FuzzRecover(f *testing.F) {
	enc := Encode(nil, []byte("committed bytes"))
	f.Add(enc, int64(len(enc)))
	f.Add(append(append([]byte(nil), enc...), 1, 2, 3), int64(len(enc)))
	f.Add(enc[:5], int64(len(enc)))
	f.Add([]byte{}, int64(0))
	f.Add([]byte{}, int64(10))
	f.Add(enc, int64(0))
	f.Add(enc, int64(-1))
	f.Add(enc, int64(-1<<63))
	f.Add(enc, int64(1<<62))
	dir := filepath.Join(f.TempDir(), "dev")
	d, err := device.Open("n1/hdd0", device.Spec{Tier: "hdd", Path: dir, Capacity: 1 << 40})
	if err != nil {
		f.Fatal(err)
	}
	st := NewStore(d)
	var ids atomic.Uint64
	f.Fuzz(func(t *testing.T, data []byte, committed int64) {
		id := ids.Add(1)
		if err := st.Create(id); err != nil {
			t.Fatal(err)
		}
		defer st.Remove(id)
		if len(data) > 0 {
			if err := st.Append(id, 0, data); err != nil {
				t.Fatal(err)
			}
		}
		res, err := st.Recover(id, committed)
		if d.Failed() {
			t.Fatalf("Recover(%d bytes, committed %d) marked the device failed: %v", len(data), committed, err)
		}
		size, serr := st.Size(id)
		if serr != nil {
			t.Fatal(serr)
		}
		if committed < 0 {
			if err == nil || res != Damaged {
				t.Fatalf("negative committed length: %v, %v", res, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("Recover: %v", err)
		}
		if size > committed {
			t.Fatalf("%d bytes left, committed %d", size, committed)
		}
		want := map[bool]RecoverResult{true: Damaged}[int64(len(data)) < committed]
		switch {
		case int64(len(data)) == committed:
			want = Intact
		case int64(len(data)) > committed:
			want = Truncated
		}
		if res != want {
			t.Fatalf("%d bytes, committed %d: %v, want %v", len(data), committed, res, want)
		}
		onDisk, err := os.ReadFile(filepath.Join(dir, FileName(id)))
		if err != nil {
			t.Fatal(err)
		}
		keep := min(int64(len(data)), committed)
		if !bytes.Equal(onDisk, data[:keep]) {
			t.Fatalf("recovery changed committed bytes")
		}
	})
}
