package extent

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/terrace-storage/terrace/internal/device"
)

// TestRemoveRacingAReadLeavesNoStaleHandle: a read racing Remove (a reader
// whose cached location still names this device, as when a move deletes
// the old replica) must not leave a cached handle on the unlinked file:
// through it the store served and verified a file that no longer exists,
// and a pull moving the egroup back here found a "complete copy" and
// copied nothing, so the record named a replica with no file.
func TestRemoveRacingAReadLeavesNoStaleHandle(t *testing.T) {
	s, _ := dirStore(t, 1<<30)
	payload := randBytes(3, 2*SliceSize)
	enc := Encode(nil, payload)
	size := int64(len(enc))
	for i := 0; i < 2000; i++ {
		id := uint64(i + 1)
		if err := s.Create(id); err != nil {
			t.Fatal(err)
		}
		if err := s.Append(id, 0, enc); err != nil {
			t.Fatal(err)
		}
		var stop atomic.Bool
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // a reader whose cached location still names this device
			defer wg.Done()
			for !stop.Load() {
				_, _ = s.Read(id, 0, int64(len(payload)), 0, 10)
			}
		}()
		if err := s.Remove(id); err != nil {
			t.Fatal(err)
		}
		stop.Store(true)
		wg.Wait()
		if _, err := s.Stat(id); !errors.Is(err, device.ErrNotExist) {
			t.Fatalf("stat after remove: %v", err)
		}
		if err := s.Verify(id, size); err == nil {
			t.Fatalf("iteration %d: egroup %d was removed (stat: no such file) but Verify(%d) still succeeds through a handle cached by a read racing Remove", i, id, size)
		}
	}
}
