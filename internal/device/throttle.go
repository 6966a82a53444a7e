package device

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Profile is an emulation profile: the bandwidth and per-operation latency
// of a class of media. Reads and writes share one bandwidth budget, as they
// share a real device's head or channel.
type Profile struct {
	Name string
	// BytesPerSec is the sustained bandwidth; 0 means unlimited.
	BytesPerSec float64
	// OpLatency is added to every read, write and sync (seek, rotation or
	// flash translation).
	OpLatency time.Duration
	// Serial makes operations queue for the device one at a time, as on a
	// disk with one head: OpLatency is device time, not overlappable
	// latency, so an hdd does at most 1/OpLatency operations per second.
	// Flash devices serve many operations at once (Serial false).
	Serial bool
}

// Profiles are the built-in emulation profiles. The numbers follow the
// issue's guidance: a 7.2K HDD does ~150 MB/s and ~4 ms per random op; a
// SATA SSD ~500 MB/s and ~0.1 ms.
var Profiles = map[string]Profile{
	"hdd":    {Name: "hdd", BytesPerSec: 150e6, OpLatency: 4 * time.Millisecond, Serial: true},
	"ssd":    {Name: "ssd", BytesPerSec: 500e6, OpLatency: 100 * time.Microsecond},
	"nvme":   {Name: "nvme", BytesPerSec: 2e9, OpLatency: 20 * time.Microsecond},
	"mem":    {Name: "mem", BytesPerSec: 8e9, OpLatency: 0},
	"remote": {Name: "remote", BytesPerSec: 50e6, OpLatency: 30 * time.Millisecond},
}

// LookupProfile returns the emulation profile a device spec names: a
// built-in one ("hdd"), or one with its bandwidth divided by a factor of at
// least 1 ("hdd/6": an hdd with a sixth of the bandwidth and the same
// per-operation latency — a busier disk, or an hdd slowed in step with a
// scaled-down experiment, whose data and moves are a few hundred times
// smaller than the real ones while the device would stay as fast).
func LookupProfile(name string) (Profile, bool) {
	base, factor, scaled := strings.Cut(name, "/")
	p, ok := Profiles[base]
	if !ok || !scaled {
		return p, ok
	}
	f, err := strconv.ParseFloat(factor, 64)
	if err != nil || !(f >= 1) || math.IsInf(f, 0) {
		return Profile{}, false
	}
	p.Name = name
	p.BytesPerSec /= f
	return p, true
}

func profileNames() string {
	var n []string
	for k := range Profiles {
		n = append(n, k)
	}
	sort.Strings(n)
	return strings.Join(n, ", ")
}

// MaxRequestBytes is the largest single request the emulated device
// serves at once. Larger operations are split into requests of this size,
// as the kernel's block layer splits a large read or write
// (max_sectors_kb), so a small client operation queued behind a 4 MiB
// background copy waits for one request, not for the whole copy.
const MaxRequestBytes = 512 << 10

// Throttle makes operations take as long as the profile says. Bandwidth is
// a virtual clock: each request reserves len/BytesPerSec of device time
// after the previous reservation, so concurrent streams share the
// bandwidth. On flash profiles latency overlaps across concurrent ops (a
// queue of depth > 1); on serial profiles (hdd) each op also reserves its
// latency as device time, so concurrent random ops queue as they do
// behind one disk head. A large operation continues without a new seek
// only while nothing else used the head in between.
type Throttle struct {
	p    Profile
	mu   sync.Mutex
	next time.Time
	seq  uint64 // reservations so far; tells a continuation if the head moved
}

// NewThrottle returns a throttle for p.
func NewThrottle(p Profile) *Throttle { return &Throttle{p: p} }

// Profile returns the throttle's profile.
func (t *Throttle) Profile() Profile { return t.p }

// Wait blocks for the time an n-byte operation takes on the emulated device.
func (t *Throttle) Wait(n int, _ bool) {
	last := t.request(n, 0, true)
	for done := min(n, MaxRequestBytes); done < n; done += MaxRequestBytes {
		last = t.request(min(n-done, MaxRequestBytes), last, false)
	}
}

// request reserves device time for one request of n bytes and sleeps
// until it is served. first marks an operation's first request; prev is
// the reservation number of the operation's previous request.
func (t *Throttle) request(n int, prev uint64, first bool) uint64 {
	n = min(n, MaxRequestBytes)
	var d time.Duration
	if t.p.BytesPerSec > 0 && n > 0 {
		d = time.Duration(float64(n) / t.p.BytesPerSec * float64(time.Second))
	}
	now := time.Now()
	t.mu.Lock()
	if t.p.Serial && (first || t.seq != prev) {
		d += t.p.OpLatency // a seek: a new operation, or another one moved the head
	}
	if t.next.Before(now) {
		t.next = now
	}
	t.next = t.next.Add(d)
	until := t.next
	t.seq++
	ticket := t.seq
	t.mu.Unlock()
	if !t.p.Serial && first {
		until = until.Add(t.p.OpLatency)
	}
	if w := time.Until(until); w > 0 {
		time.Sleep(w)
	}
	return ticket
}
