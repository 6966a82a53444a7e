package replica

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/model"
)

// slowFailingSource is a via IO whose source reads are slow and fail, so
// every pull of the egroup runs a Copy (none finds a verified copy in
// place), and counts how many copies run at once.
type slowFailingSource struct {
	*Local
	active, peak atomic.Int32
}

func (s *slowFailingSource) ReadRaw(ctx context.Context, r model.Replica, id uint64, off, n int64) ([]byte, error) {
	a := s.active.Add(1)
	defer s.active.Add(-1)
	for {
		p := s.peak.Load()
		if a <= p || s.peak.CompareAndSwap(p, a) {
			break
		}
	}
	time.Sleep(20 * time.Millisecond)
	return nil, errors.New("source unreadable")
}

// TestConcurrentPullsOfOneReplicaAreSerialised: pulls of one replica
// never run two copies at once, also when pulls keep arriving while
// others wait (the per-replica mutex used to leave the map when its holder
// released it, and a later pull made a second one: each copy's Create
// truncated the other's file).
func TestConcurrentPullsOfOneReplicaAreSerialised(t *testing.T) {
	l, _ := newLocal(t)
	size := write(t, l, src, 9, []byte("payload"))
	via := &slowFailingSource{Local: l}
	var wg sync.WaitGroup
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = l.PullFrom(context.Background(), via, dst, src, 9, size)
		}()
		time.Sleep(7 * time.Millisecond)
	}
	wg.Wait()
	if p := via.peak.Load(); p > 1 {
		t.Fatalf("%d copies of egroup 9 to %s ran at once; PullFrom is meant to serialise them", p, dst.Device)
	}
}
