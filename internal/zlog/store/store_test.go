package store

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/terrace-storage/terrace/internal/device"
)

const dev = "n1/ssd0"

func openDev(t testing.TB, dir string) *device.Device {
	t.Helper()
	d, err := device.Open(dev, device.Spec{Tier: "ssd", Path: dir, Capacity: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func openStore(t testing.TB, dir string, fileBytes int64) *Store {
	t.Helper()
	s, err := Open([]*device.Device{openDev(t, dir)}, Options{JournalFileBytes: fileBytes})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func tok(i int) Token {
	var t Token
	copy(t[:], fmt.Sprintf("tok-%012d", i))
	return t
}

var k0 = Key{Log: 7, Segment: 1, Stripe: 0}

// put does Begin + Write and returns the Begin result.
func put(t testing.TB, s *Store, key Key, pos, epoch uint64, kind Kind, tk Token, data []byte, mode Mode) Result {
	t.Helper()
	p, res := s.Begin(dev, key, pos, epoch, kind, tk, mode)
	if p != nil {
		if err := p.Write(data); err != nil {
			t.Fatalf("write %d: %v", pos, err)
		}
	}
	return res
}

func TestWriteOnce(t *testing.T) {
	s := openStore(t, t.TempDir(), 0)
	defer s.Close()
	if r := put(t, s, k0, 0, 3, KindData, tok(1), []byte("hello"), Normal); r.Status != OK || r.Existing {
		t.Fatalf("first write: %+v", r)
	}
	// Same token again: idempotent, not confirmed yet.
	if r := put(t, s, k0, 0, 3, KindData, tok(1), []byte("hello"), Normal); r.Status != OK || !r.Existing || r.Confirmed {
		t.Fatalf("retry: %+v", r)
	}
	// Another writer or a fill: taken, and told what is there.
	if r := put(t, s, k0, 0, 3, KindData, tok(2), []byte("other"), Normal); r.Status != Taken || r.Token != tok(1) || r.Kind != KindData {
		t.Fatalf("second writer: %+v", r)
	}
	if r := put(t, s, k0, 0, 3, KindFill, tok(3), nil, Normal); r.Status != Taken {
		t.Fatalf("fill over data: %+v", r)
	}
	// Unconfirmed entries of an open replica read as not written.
	if r := s.Read(dev, k0, 0, 3, 0); r.Status != NotWritten {
		t.Fatalf("unconfirmed read: %+v", r)
	}
	s.Confirm(dev, k0, 0)
	if r := s.Read(dev, k0, 0, 3, 0); r.Status != OK || string(r.Data) != "hello" || r.Kind != KindData {
		t.Fatalf("read: %+v", r)
	}
	// A fill, then a late writer.
	if r := put(t, s, k0, 2, 3, KindFill, tok(9), nil, Normal); r.Status != OK {
		t.Fatalf("fill: %+v", r)
	}
	s.Confirm(dev, k0, 2)
	if r := s.Read(dev, k0, 2, 3, 0); r.Status != OK || r.Kind != KindFill {
		t.Fatalf("read fill: %+v", r)
	}
	if r := put(t, s, k0, 2, 3, KindData, tok(4), []byte("late"), Normal); r.Status != Taken || r.Kind != KindFill {
		t.Fatalf("late writer: %+v", r)
	}
	// An older epoch than the segment's is stale; a newer one means the
	// segment was closed elsewhere.
	if r := put(t, s, k0, 4, 2, KindData, tok(5), []byte("x"), Normal); r.Status != StaleEpoch {
		t.Fatalf("old epoch: %+v", r)
	}
	if r := put(t, s, k0, 4, 4, KindData, tok(5), []byte("x"), Normal); r.Status != Sealed {
		t.Fatalf("new epoch: %+v", r)
	}
	// A reservation in flight: the same token is told to retry, another
	// is told the position is taken; reads see nothing yet.
	p, r := s.Begin(dev, k0, 6, 3, KindData, tok(6), Normal)
	if p == nil || r.Status != OK {
		t.Fatalf("begin: %+v", r)
	}
	if _, r := s.Begin(dev, k0, 6, 3, KindData, tok(6), Normal); r.Status != Busy {
		t.Fatalf("same token in flight: %+v", r)
	}
	if _, r := s.Begin(dev, k0, 6, 3, KindData, tok(7), Normal); r.Status != Taken {
		t.Fatalf("other token in flight: %+v", r)
	}
	p.Cancel()
	if r := put(t, s, k0, 6, 3, KindData, tok(7), []byte("y"), Normal); r.Status != OK {
		t.Fatalf("after cancel: %+v", r)
	}
	if r := s.Read(dev, k0, 1, 3, 0); r.Status != NotWritten {
		t.Fatalf("hole: %+v", r)
	}
	if r := s.Read(dev, k0, 0, 3, 1); r.Status != Trimmed {
		t.Fatalf("below the trim point: %+v", r)
	}
}

func TestSealAndSettle(t *testing.T) {
	s := openStore(t, t.TempDir(), 0)
	defer s.Close()
	for _, p := range []uint64{0, 2, 8} {
		put(t, s, k0, p, 5, KindData, tok(int(p)), []byte{byte(p)}, Normal)
	}
	put(t, s, k0, 9, 5, KindFill, tok(9), nil, Normal)
	// Committed entries of the open replica read at its epoch.
	if r := s.Read(dev, k0, 9, 5, 0); r.Status != NotWritten {
		t.Fatalf("unconfirmed read before the seal: %+v", r)
	}
	ps, fs, r := s.Seal(dev, k0, 6)
	if r.Status != OK || fmt.Sprint(ps) != "[0 2 8 9]" || fmt.Sprint(fs) != "[9]" {
		t.Fatalf("seal: %v fills %v %+v", ps, fs, r)
	}
	// A reader of the older epoch must wait for the layout that closes
	// the segment: until it commits, settle may still fill what it holds.
	if r := s.Read(dev, k0, 2, 5, 0); r.Status != StaleEpoch {
		t.Fatalf("read at the epoch before the seal: %+v", r)
	}
	// Sealed: no new entries from clients, stale epochs refused, and the
	// old writer's idempotent retry (new epoch) still answers OK.
	if r := put(t, s, k0, 4, 6, KindData, tok(4), []byte("x"), Normal); r.Status != Sealed {
		t.Fatalf("write after seal: %+v", r)
	}
	if r := put(t, s, k0, 4, 5, KindData, tok(4), []byte("x"), Normal); r.Status != StaleEpoch {
		t.Fatalf("stale write after seal: %+v", r)
	}
	if r := put(t, s, k0, 2, 6, KindData, tok(2), []byte{2}, Normal); r.Status != OK || !r.Existing {
		t.Fatalf("idempotent retry after seal: %+v", r)
	}
	// Settle fills a hole and copies an entry.
	if r := put(t, s, k0, 4, 6, KindFill, Token{}, nil, Settle); r.Status != OK {
		t.Fatalf("settle fill: %+v", r)
	}
	if r := put(t, s, k0, 6, 6, KindData, tok(66), []byte("copied"), Settle); r.Status != OK {
		t.Fatalf("settle copy: %+v", r)
	}
	// Sealed entries are readable without confirmation.
	if r := s.Read(dev, k0, 6, 6, 0); r.Status != OK || string(r.Data) != "copied" {
		t.Fatalf("read settled: %+v", r)
	}
	if _, _, r := s.Seal(dev, k0, 5); r.Status != StaleEpoch {
		t.Fatalf("older seal: %+v", r)
	}
	// Settle into an open replica is refused.
	k1 := Key{Log: 7, Segment: 2, Stripe: 0}
	if r := put(t, s, k1, 0, 6, KindFill, Token{}, nil, Settle); r.Status != Failed {
		t.Fatalf("settle into open replica: %+v", r)
	}
}

func TestReplay(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, 4<<10) // small files: many rolls
	data := func(p uint64) []byte { return bytes.Repeat([]byte{byte(p)}, int(p%700)+1) }
	for p := uint64(0); p < 200; p++ {
		if p%7 == 3 {
			put(t, s, k0, p, 2, KindFill, tok(int(p)), nil, Normal)
			continue
		}
		put(t, s, k0, p, 2, KindData, tok(int(p)), data(p), Normal)
	}
	if r := s.Trim(dev, k0, 10); r.Status != OK {
		t.Fatalf("trim: %+v", r)
	}
	k1 := Key{Log: 7, Segment: 1, Stripe: 1}
	put(t, s, k1, 1, 2, KindData, tok(1), []byte("gone"), Normal)
	if err := s.Reset(dev, k1); err != nil {
		t.Fatal(err)
	}
	put(t, s, k1, 3, 2, KindData, tok(3), []byte("kept"), Normal)
	s.Seal(dev, k0, 3)
	s.Close()

	s = openStore(t, dir, 4<<10)
	defer s.Close()
	if got := s.Sealed(dev, k0); got != 3 {
		t.Fatalf("sealed epoch after replay %d, want 3", got)
	}
	for p := uint64(0); p < 200; p++ {
		r := s.Read(dev, k0, p, 3, 0)
		switch {
		case p == 10:
			if r.Status != Trimmed {
				t.Fatalf("pos %d: %+v, want trimmed", p, r)
			}
		case p%7 == 3:
			if r.Status != OK || r.Kind != KindFill {
				t.Fatalf("pos %d: %+v, want fill", p, r)
			}
		default:
			if r.Status != OK || !bytes.Equal(r.Data, data(p)) || r.Token != tok(int(p)) {
				t.Fatalf("pos %d: %+v", p, r)
			}
		}
	}
	if r := s.ReadAny(dev, k1, 1); r.Status != NotWritten {
		t.Fatalf("reset entry came back: %+v", r)
	}
	if r := s.ReadAny(dev, k1, 3); r.Status != OK || string(r.Data) != "kept" {
		t.Fatalf("entry after reset: %+v", r)
	}
	// Entries of an open replica come back unconfirmed: they may have
	// been acknowledged, so reads answer Busy (the reader completes them).
	if r := s.Read(dev, k1, 3, 2, 0); r.Status != Busy {
		t.Fatalf("open replica after restart: %+v", r)
	}
}

func TestTornTail(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, 0)
	for p := uint64(0); p < 10; p++ {
		put(t, s, k0, p, 1, KindData, tok(int(p)), []byte("entry"), Normal)
	}
	s.Close()
	files, _ := filepath.Glob(filepath.Join(dir, "lg", "*.jnl"))
	if len(files) != 1 {
		t.Fatalf("journal files %v", files)
	}
	st, _ := os.Stat(files[0])
	// A crash in the middle of the next record: half of it on disk.
	rec := record{kind: KindData, key: k0, pos: 10, epoch: 1, token: tok(10), data: []byte("torn entry")}
	b := appendRecord(nil, &rec)
	f, _ := os.OpenFile(files[0], os.O_WRONLY|os.O_APPEND, 0)
	f.Write(b[:len(b)/2])
	f.Close()

	s = openStore(t, dir, 0)
	defer s.Close()
	if r := s.ReadAny(dev, k0, 10); r.Status != NotWritten {
		t.Fatalf("torn record replayed: %+v", r)
	}
	for p := uint64(0); p < 10; p++ {
		if r := s.ReadAny(dev, k0, p); r.Status != OK || string(r.Data) != "entry" {
			t.Fatalf("pos %d lost: %+v", p, r)
		}
	}
	st2, _ := os.Stat(files[0])
	if st2.Size() != st.Size() {
		t.Fatalf("torn tail not cut: %d bytes, want %d", st2.Size(), st.Size())
	}
	// New writes go on after the cut and survive another restart.
	put(t, s, k0, 10, 1, KindData, tok(10), []byte("after"), Normal)
	if r := s.ReadAny(dev, k0, 10); r.Status != OK || string(r.Data) != "after" {
		t.Fatalf("write after cut: %+v", r)
	}
}

func TestCorruptRecordIsNeverReturned(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, 0)
	put(t, s, k0, 0, 1, KindData, tok(0), []byte("precious bytes"), Normal)
	s.Close()
	files, _ := filepath.Glob(filepath.Join(dir, "lg", "*.jnl"))
	b, _ := os.ReadFile(files[0])
	b[len(b)-3] ^= 0xff // flip a data byte
	os.WriteFile(files[0], b, 0o644)
	s = openStore(t, dir, 0)
	defer s.Close()
	if r := s.ReadAny(dev, k0, 0); r.Status == OK {
		t.Fatalf("corrupt entry returned: %+v", r)
	}
}

func TestSpaceReclaimed(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, 16<<10)
	defer s.Close()
	payload := bytes.Repeat([]byte("z"), 1000)
	for p := uint64(0); p < 300; p++ {
		put(t, s, k0, p, 1, KindData, tok(int(p)), payload, Normal)
	}
	before := s.Devices()[0]
	if before.Files < 10 {
		t.Fatalf("expected many journal files, got %+v", before)
	}
	if n := s.TrimBefore(k0.Log, 280); n != 280 {
		t.Fatalf("trimmed %d entries, want 280", n)
	}
	after := s.Devices()[0]
	if after.Files > 3 {
		t.Fatalf("journal files not reclaimed: before %+v after %+v", before, after)
	}
	for p := uint64(280); p < 300; p++ {
		if r := s.ReadAny(dev, k0, p); r.Status != OK || !bytes.Equal(r.Data, payload) {
			t.Fatalf("pos %d after reclaim: %+v", p, r)
		}
	}
	// Dropping the replica frees the rest.
	s.Drop(func(string, Key) bool { return false })
	put(t, s, Key{Log: 9}, 0, 1, KindData, tok(1), payload, Normal) // roll past the old active file
	for i := 0; i < 20; i++ {
		put(t, s, Key{Log: 9}, uint64(i+1), 1, KindData, tok(i+2), payload, Normal)
	}
	if st := s.Devices()[0]; st.Files > 3 {
		t.Fatalf("files after drop: %+v", st)
	}
}

// TestConcurrentWriteOnce: many writers race for overlapping positions;
// each position ends up with exactly one entry, the one whose Begin won,
// and it survives a restart.
func TestConcurrentWriteOnce(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, 64<<10)
	const writers, positions = 16, 400
	winners := make([]Token, positions)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for i := 0; i < positions; i++ {
				pos := uint64(rng.IntN(positions))
				tk := tok(w*1000000 + i)
				p, res := s.Begin(dev, k0, pos, 1, KindData, tk, Normal)
				if p == nil {
					if res.Status != Taken && res.Status != Busy {
						t.Errorf("begin: %+v", res)
					}
					continue
				}
				if err := p.Write(tk[:]); err != nil {
					t.Error(err)
					continue
				}
				mu.Lock()
				if winners[pos] != (Token{}) {
					t.Errorf("position %d won twice", pos)
				}
				winners[pos] = tk
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	s.Close()
	s = openStore(t, dir, 64<<10)
	defer s.Close()
	for pos, w := range winners {
		r := s.ReadAny(dev, k0, uint64(pos))
		if w == (Token{}) {
			if r.Status != NotWritten {
				t.Fatalf("pos %d: %+v, want not written", pos, r)
			}
			continue
		}
		if r.Status != OK || r.Token != w || !bytes.Equal(r.Data, w[:]) {
			t.Fatalf("pos %d: %+v, want winner %q", pos, r, w)
		}
	}
}

func TestUnknownDevice(t *testing.T) {
	s := openStore(t, t.TempDir(), 0)
	defer s.Close()
	if _, r := s.Begin("n9/ssd0", k0, 0, 1, KindData, tok(1), Normal); r.Status != Failed || r.Err == nil {
		t.Fatalf("unknown device: %+v", r)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	for _, r := range []record{
		{kind: KindData, key: k0, pos: 5, epoch: 2, token: tok(1), data: []byte("hello")},
		{kind: KindFill, key: k0, pos: 6, epoch: 2},
		{kind: kindSeal, key: k0, epoch: 9},
	} {
		f.Add(appendRecord(nil, &r))
	}
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, n, err := decodeRecord(b)
		if err != nil {
			return
		}
		if n > len(b) {
			t.Fatalf("length %d beyond input %d", n, len(b))
		}
		back := appendRecord(nil, &r)
		if !bytes.Equal(back, b[:n]) {
			t.Fatalf("re-encoding differs")
		}
	})
}
