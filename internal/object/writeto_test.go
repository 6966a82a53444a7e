package object

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/terrace-storage/terrace/internal/extent"
	"github.com/terrace-storage/terrace/internal/model"
)

// TestReaderWriteToMatchesRead: the reader's WriteTo (what io.Copy uses
// for an S3 response body) yields exactly the bytes Read does, for
// ranges that start, end and cross extent and slice boundaries.
func TestReaderWriteToMatchesRead(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.l.CreateBucket(ctx, "bkt", "me", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	data := payload(3, 3<<20+17) // 13 extents of 256 KiB
	e.put("bkt", "k", data, "")
	rng := rand.New(rand.NewPCG(1, 2))
	ranges := [][2]int64{{0, int64(len(data))}, {0, 1}, {int64(len(data)) - 1, 1}, {256 << 10, 256 << 10}, {extent.SliceSize - 3, 7}}
	for range 20 {
		off := rng.Int64N(int64(len(data)))
		ranges = append(ranges, [2]int64{off, 1 + rng.Int64N(int64(len(data))-off)})
	}
	for _, r := range ranges {
		_, rc, err := e.l.Get(ctx, "bkt", "k", r[0], r[1])
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		n, err := rc.(io.WriterTo).WriteTo(&got)
		rc.Close()
		if err != nil {
			t.Fatalf("range %v: %v", r, err)
		}
		if n != r[1] || !bytes.Equal(got.Bytes(), data[r[0]:r[0]+r[1]]) {
			t.Fatalf("range %v: WriteTo gave %d bytes, not the object's", r, n)
		}
	}
}

// TestReaderWriteToFailsOnUnreadableTail: when the only replica of a
// later extent is corrupt, WriteTo stops with an error after the good
// bytes instead of ending the body short and quietly.
func TestReaderWriteToFailsOnUnreadableTail(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.l.CreateBucket(ctx, "bkt", "me", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	data := payload(4, 1<<20)
	e.put("bkt", "k", data, "ssd=1")
	loc, err := e.l.Locate(ctx, "bkt", "k")
	if err != nil {
		t.Fatal(err)
	}
	last := loc.Extents[len(loc.Extents)-1]
	if len(last.Replicas) != 1 {
		t.Fatalf("%d replicas, want 1", len(last.Replicas))
	}
	st, _ := e.local.Store(last.Replicas[0].Device)
	path := filepath.Join(st.Device().Spec().Path, extent.FileName(last.Egroup))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[last.EgroupOff+extent.HeaderSize+3] ^= 0x40
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, rc, err := e.l.Get(ctx, "bkt", "k", 0, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var got bytes.Buffer
	n, err := rc.(io.WriterTo).WriteTo(&got)
	if err == nil {
		t.Fatalf("WriteTo of an object with a corrupt only replica returned %d bytes and no error", n)
	}
	if n >= int64(len(data)) || !bytes.Equal(got.Bytes(), data[:n]) {
		t.Fatalf("WriteTo wrote %d bytes before failing; they must be the object's good prefix", n)
	}
}

// TestConcurrentLargeWriters: writers of multi-extent objects share the
// pooled encode buffers; every object reads back as written (a buffer
// returned to the pool while an append still used it would mix objects).
func TestConcurrentLargeWriters(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.l.CreateBucket(ctx, "bkt", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 4
	size := func(w, i int) int { return 600<<10 + (w*each+i)*37_001 }
	errc := make(chan error, writers)
	for w := range writers {
		go func() {
			for i := range each {
				data := payload(uint64(w*100+i), size(w, i))
				if _, err := e.l.Put(ctx, "bkt", fmt.Sprintf("%d/%d", w, i), bytes.NewReader(data), PutOptions{Size: int64(len(data))}); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
	}
	for range writers {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	for w := range writers {
		for i := range each {
			got, err := e.get("bkt", fmt.Sprintf("%d/%d", w, i), 0, -1)
			if err != nil || !bytes.Equal(got, payload(uint64(w*100+i), size(w, i))) {
				t.Fatalf("%d/%d: %v", w, i, err)
			}
		}
	}
}
