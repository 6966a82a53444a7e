package store

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestRollKeepsJustWrittenFile: each writer keeps only its latest entry
// live (a queue consumed and prefix-trimmed at once). When the journal
// rolls to a new file right after a batch, the old file must count that
// batch's records before anyone can see it empty: removing it deleted
// entries whose Write had already returned nil.
func TestRollKeepsJustWrittenFile(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, 64<<10)
	defer s.Close()
	var lost atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := Key{Log: uint64(100 + w), Segment: 1}
			data := bytes.Repeat([]byte{byte(0x61 + w)}, 4096)
			for p := uint64(0); p < 1500; p++ {
				pe, r := s.Begin(dev, key, p, 1, KindData, tok(int(p)), Normal)
				if pe == nil {
					t.Errorf("begin: %+v", r)
					return
				}
				if err := pe.Write(data); err != nil {
					t.Errorf("write: %v", err)
					return
				}
				if got := s.ReadAny(dev, key, p); got.Status != OK || !bytes.Equal(got.Data, data) {
					if lost.Add(1) == 1 {
						first.Store(fmt.Sprintf("log %d pos %d: %v %v", key.Log, p, got.Status, got.Err))
					}
				}
				s.TrimBefore(key.Log, p+1) // consumed: the only live record of this writer is gone
			}
		}()
	}
	wg.Wait()
	if n := lost.Load(); n > 0 {
		t.Fatalf("%d acknowledged writes unreadable right after Write returned nil; first: %v", n, first.Load())
	}
}

// TestResetWaitsForWritesInFlight: a write reserved before repair's seal
// and reset reaches the journal late. The reset must not be journaled
// before it, or replay brings the late entry back over what repair copied
// in afterwards.
func TestResetWaitsForWritesInFlight(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, 0)
	put(t, s, k0, 0, 3, KindData, tok(1), []byte("zero"), Normal)
	p, r := s.Begin(dev, k0, 5, 3, KindData, tok(2), Normal) // in flight
	if p == nil {
		t.Fatalf("begin: %+v", r)
	}
	if _, _, r := s.Seal(dev, k0, 4); r.Status != OK { // recovery gave up on 5: this replica is stale
		t.Fatal(r)
	}
	reset := make(chan error, 1)
	go func() { reset <- s.Reset(dev, k0) }() // repair
	select {
	case err := <-reset:
		t.Fatalf("reset returned (%v) with a write in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := p.Write([]byte("late, never acknowledged")); err != nil { // the stuck record lands now
		t.Fatalf("late write: %v", err)
	}
	if err := <-reset; err != nil {
		t.Fatal(err)
	}
	// Repair copies the settled state: 0 = data, 5 = fill.
	put(t, s, k0, 0, 4, KindData, tok(1), []byte("zero"), Settle)
	put(t, s, k0, 5, 4, KindFill, Token{}, nil, Settle)
	if got := s.ReadAny(dev, k0, 5); got.Kind != KindFill {
		t.Fatalf("live: %+v", got)
	}
	s.Close()
	s = openStore(t, dir, 0)
	defer s.Close()
	if got := s.ReadAny(dev, k0, 5); got.Kind != KindFill {
		t.Fatalf("after a restart the repaired replica holds %v %q at 5; the others hold a fill", got.Kind, got.Data)
	}
}
