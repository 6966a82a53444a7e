package extent

import (
	"bytes"
	"sync"
	"testing"
)

// A replica file removed while a reader holds its handle (a move deleting
// its source while a client GET located the replica just before the
// switch) must not close the reader's file under it: the read finishes
// on the removed file, and the device stays healthy. Closing it made the
// read fail with "file already closed", which the device counts as an
// I/O error and marks the whole device failed.
func TestRemoveWhileReading(t *testing.T) {
	for name, s := range map[string]*Store{"dir": first(dirStore(t, 1<<30)), "mem": memStore(t, 1<<30)} {
		t.Run(name, func(t *testing.T) {
			payload := randBytes(1, 3*SliceSize+5)
			if err := s.Create(7); err != nil {
				t.Fatal(err)
			}
			off := appendExtent(t, s, 7, payload)
			h, err := s.acquire(7, false) // a reader between acquire and ReadAt
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Remove(7); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, EncodedLen(int64(len(payload))))
			if _, err := h.f.ReadAt(buf, off); err != nil {
				t.Errorf("read of a replica removed while in use: %v", err)
			}
			s.release(h)
			if s.Device().Failed() {
				t.Fatal("device marked failed by a remove racing a read")
			}
			if _, err := s.Read(7, off, int64(len(payload)), 0, 1); err == nil {
				t.Error("read after remove succeeded: the removed replica is still served")
			}
			if s.Device().Failed() {
				t.Fatal("device marked failed by reading a removed replica")
			}
		})
	}
}

// Readers, removals and re-creations of the same egroups at once: every
// read returns the right bytes or fails cleanly (not found, short); the
// device is never marked failed. Run with -race.
func TestRemoveRecreateConcurrentReads(t *testing.T) {
	s, _ := dirStore(t, 1<<30)
	payload := randBytes(2, 2*SliceSize)
	write := func(id uint64) {
		if err := s.Create(id); err != nil {
			t.Error(err)
			return
		}
		if err := s.Append(id, 0, Encode(nil, payload)); err != nil {
			t.Error(err)
		}
	}
	for id := uint64(1); id <= 4; id++ {
		write(id)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				got, err := s.Read(uint64(i%4+1), 0, int64(len(payload)), 0, int64(len(payload)))
				if err == nil && !bytes.Equal(got, payload) {
					t.Error("wrong bytes")
					return
				}
			}
		}()
	}
	for i := 0; i < 2000; i++ {
		id := uint64(i%4 + 1)
		if err := s.Remove(id); err != nil {
			t.Fatal(err)
		}
		write(id)
	}
	close(stop)
	wg.Wait()
	if s.Device().Failed() {
		t.Fatal("device marked failed by removals racing reads")
	}
}

func first(s *Store, _ string) *Store { return s }
