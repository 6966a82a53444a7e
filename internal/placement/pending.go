package placement

import (
	"sort"
	"time"

	"github.com/terrace-storage/terrace/internal/model"
)

// Stale statistics (Allen §6.1, Appendix A). Device statistics reach the
// placer on an interval; between refreshes every decision sees the same
// numbers, so a policy that likes one device keeps choosing it (herding).
// Pending is the fix: the edge records each placement it makes, and before
// the next decision folds them into the stale snapshot: the bytes written
// since the refresh are added to the device's usage, and writes still
// expected to be in flight are added to its queue and stream counts.
//
// Usage and in-flight load are treated differently on purpose. Bytes stay
// written until the next refresh reports them, so they accumulate. A write
// occupies a device only while it is queued or running, so Pending models
// each device as a first-in first-out server at its measured WriteBps: a
// placement starts when the device's earlier pending writes finish and
// runs for bytes / WriteBps; it counts towards QueueLen and ActiveStreams
// until then. A device that attracts a burst of placements therefore shows
// a queue that grows with the burst (what herding needs to see), while a
// lightly used one shows writes that expire after their service time.
// Counting every placement since the refresh instead would drive t_q to 0
// on every device after q_ceil placements and blind the policy.
//
// Pending is pure decision-side state: time is an input, it does no I/O,
// and it is not safe for concurrent use (the edge serialises access).

// DefaultPendingWriteBps is the service rate assumed for a device whose
// write throughput is unknown (0): 100 MB/s, a slow HDD, so an unknown
// device's in-flight writes are never underestimated by much.
const DefaultPendingWriteBps = 100e6

// MaxPendingInFlightPerDevice bounds the in-flight writes Pending tracks
// per device. A device rarely has more than a few hundred operations
// queued; 4,096 entries cost 96 KiB per device at worst. Past the cap the
// earliest-expiring entry is dropped, so the estimate saturates instead of
// growing without bound.
const MaxPendingInFlightPerDevice = 4096

// Pending accumulates placements made since the last statistics refresh.
// The zero value is ready to use.
type Pending struct {
	devs map[model.DeviceID]*pendingDev
}

type pendingDev struct {
	bytes int64
	// busyUntil is when the device finishes the pending writes.
	busyUntil time.Time
	// expiries of writes assumed in flight, ascending (FIFO order).
	expiries []time.Time
}

// Record notes that replicas of bytes bytes were placed at now. s supplies
// each device's write throughput for the in-flight estimate.
func (p *Pending) Record(s *model.Snapshot, now time.Time, replicas []model.Replica, bytes int64) {
	if p.devs == nil {
		p.devs = map[model.DeviceID]*pendingDev{}
	}
	for _, r := range replicas {
		pd := p.devs[r.Device]
		if pd == nil {
			pd = &pendingDev{}
			p.devs[r.Device] = pd
		}
		pd.bytes += bytes
		bps := DefaultPendingWriteBps
		if d, ok := s.Device(r.Device); ok && d.WriteBps > 0 {
			bps = d.WriteBps
		}
		start := now
		if pd.busyUntil.After(start) {
			start = pd.busyUntil
		}
		pd.busyUntil = start.Add(time.Duration(float64(bytes) / bps * float64(time.Second)))
		pd.expiries = append(pd.expiries, pd.busyUntil)
		if len(pd.expiries) > MaxPendingInFlightPerDevice {
			pd.expiries = pd.expiries[1:]
		}
	}
}

// Reset forgets everything; call it when fresh statistics arrive (they
// already include the placements recorded so far).
func (p *Pending) Reset() { p.devs = nil }

// Empty reports whether nothing is pending.
func (p *Pending) Empty() bool { return len(p.devs) == 0 }

// Adjust returns s with the pending placements folded in as of now: each
// device's UsedBytes grows by the bytes placed on it, and its QueueLen and
// ActiveStreams by the writes still in flight at now. Expired in-flight
// entries are dropped. s is not modified; when nothing is pending Adjust
// returns s itself.
func (p *Pending) Adjust(s *model.Snapshot, now time.Time) *model.Snapshot {
	if p.Empty() {
		return s
	}
	for _, pd := range p.devs {
		k := sort.Search(len(pd.expiries), func(j int) bool { return pd.expiries[j].After(now) })
		pd.expiries = pd.expiries[k:]
	}
	return s.MapDevices(func(d *model.Device) {
		pd := p.devs[d.ID]
		if pd == nil {
			return
		}
		d.UsedBytes += pd.bytes
		d.QueueLen += len(pd.expiries)
		d.ActiveStreams += len(pd.expiries)
	})
}
