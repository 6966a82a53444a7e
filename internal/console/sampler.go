package console

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DeviceReading is one device of the cluster as this node sees it.
type DeviceReading struct {
	ID            string
	Tier          string
	CapacityBytes int64
	UsedBytes     int64
	Failed        bool
	// Local devices are this node's: their I/O counters are known.
	Local      bool
	ReadBytes  int64 // cumulative, local devices only
	WriteBytes int64 // cumulative, local devices only
}

// TierReading is one tier's hot and cold bytes (from the tier report).
type TierReading struct {
	Tier      string
	HotBytes  int64
	ColdBytes int64
}

// Source is what the sampler reads. Devices and Latency are cheap (the
// cached cluster topology and live counters) and read every tick; Tiers
// scans metadata and is read every slowEvery.
type Source interface {
	Devices() []DeviceReading
	Tiers(ctx context.Context) ([]TierReading, error)
	// Latency is the recent client operation latency and its quiet
	// baseline (0 when unknown).
	Latency() (recent, baseline time.Duration)
}

// TierSample is one tier at one instant.
type TierSample struct {
	Tier          string  `json:"tier"`
	CapacityBytes int64   `json:"capacity_bytes"`
	UsedBytes     int64   `json:"used_bytes"`
	HotBytes      int64   `json:"hot_bytes"` // from the last tier report
	ColdBytes     int64   `json:"cold_bytes"`
	ReadBps       float64 `json:"read_bps"`  // this node's devices of the tier
	WriteBps      float64 `json:"write_bps"` // this node's devices of the tier
	FailedDevices int     `json:"failed_devices"`
}

// Sample is the node's state at one instant, as the console charts it.
type Sample struct {
	Time            time.Time    `json:"time"`
	Tiers           []TierSample `json:"tiers"`
	LatencySeconds  float64      `json:"latency_s"`
	BaselineSeconds float64      `json:"baseline_s"`
	// TiersError is set when the tier report failed this time (the usage
	// figures are then the last good ones).
	TiersError string `json:"tiers_error,omitempty"`
}

// Sampler keeps a bounded ring of samples: memory is Capacity samples no
// matter how long the node runs.
type Sampler struct {
	src       Source
	every     time.Duration
	slowEvery time.Duration

	mu       sync.Mutex
	ring     []Sample
	next     int // index the next sample goes to
	full     bool
	prevDev  map[string]DeviceReading
	prevAt   time.Time
	tiers    []TierReading
	tiersAt  time.Time
	tiersErr string
	subs     map[chan Sample]struct{}
	closed   bool
	// The tier report scans metadata, so it is read only while someone
	// looks: a console page, or Prometheus collecting the hot/cold
	// metrics. wanted is set by those; wantedAt is the sample time at
	// which it was last seen set.
	wanted   atomic.Bool
	wantedAt time.Time
}

// NewSampler returns a sampler over src keeping capacity samples taken
// every interval (tier report every slowEvery, at least every interval).
func NewSampler(src Source, interval, slowEvery time.Duration, capacity int) *Sampler {
	if interval <= 0 {
		interval = 5 * time.Second
	}
	if slowEvery < interval {
		slowEvery = interval
	}
	if capacity <= 0 {
		capacity = 720
	}
	return &Sampler{src: src, every: interval, slowEvery: slowEvery, ring: make([]Sample, capacity),
		subs: map[chan Sample]struct{}{}}
}

// Capacity is how many samples the ring holds.
func (s *Sampler) Capacity() int { return len(s.ring) }

// Interval is the time between samples.
func (s *Sampler) Interval() time.Duration { return s.every }

// Run samples until ctx ends.
func (s *Sampler) Run(ctx context.Context) {
	t := time.NewTicker(s.every)
	defer t.Stop()
	s.Take(ctx, time.Now())
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.Take(ctx, now)
		}
	}
}

// Take reads the source once and appends a sample stamped now.
func (s *Sampler) Take(ctx context.Context, now time.Time) Sample {
	devs := s.src.Devices()
	recent, base := s.src.Latency()
	s.mu.Lock()
	if s.wanted.Swap(false) || len(s.subs) > 0 {
		s.wantedAt = now
	}
	looked := !s.wantedAt.IsZero() && now.Sub(s.wantedAt) < 2*s.slowEvery
	needTiers := looked && (s.tiersAt.IsZero() || now.Sub(s.tiersAt) >= s.slowEvery)
	s.mu.Unlock()
	var tiers []TierReading
	var terr error
	if needTiers {
		tiers, terr = s.src.Tiers(ctx)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if needTiers {
		if terr != nil {
			s.tiersErr = terr.Error()
		} else {
			s.tiers, s.tiersErr = tiers, ""
		}
		s.tiersAt = now
	}
	sm := Sample{Time: now, LatencySeconds: recent.Seconds(), BaselineSeconds: base.Seconds(), TiersError: s.tiersErr}
	byTier := map[string]*TierSample{}
	get := func(tier string) *TierSample {
		if t, ok := byTier[tier]; ok {
			return t
		}
		t := &TierSample{Tier: tier}
		byTier[tier] = t
		return t
	}
	for _, tr := range s.tiers {
		t := get(tr.Tier)
		t.HotBytes, t.ColdBytes = tr.HotBytes, tr.ColdBytes
	}
	secs := now.Sub(s.prevAt).Seconds()
	cur := map[string]DeviceReading{}
	for _, d := range devs {
		t := get(d.Tier)
		t.CapacityBytes += d.CapacityBytes
		t.UsedBytes += d.UsedBytes
		if d.Failed {
			t.FailedDevices++
		}
		if !d.Local {
			continue
		}
		cur[d.ID] = d
		if p, ok := s.prevDev[d.ID]; ok && secs > 0 {
			// Counters restart with the process; a drop is not negative work.
			if dr := d.ReadBytes - p.ReadBytes; dr > 0 {
				t.ReadBps += float64(dr) / secs
			}
			if dw := d.WriteBytes - p.WriteBytes; dw > 0 {
				t.WriteBps += float64(dw) / secs
			}
		}
	}
	s.prevDev, s.prevAt = cur, now
	for _, t := range byTier {
		sm.Tiers = append(sm.Tiers, *t)
	}
	sort.Slice(sm.Tiers, func(i, j int) bool { return tierOrder(sm.Tiers[i].Tier) < tierOrder(sm.Tiers[j].Tier) })
	s.ring[s.next] = sm
	s.next = (s.next + 1) % len(s.ring)
	if s.next == 0 {
		s.full = true
	}
	for ch := range s.subs {
		select {
		case ch <- sm:
		default: // a slow reader misses a tick, never blocks sampling
		}
	}
	return sm
}

// Want marks the tier report as wanted: the next samples read it (every
// slowEvery) until nobody has asked for two slowEvery intervals.
func (s *Sampler) Want() { s.wanted.Store(true) }

// History returns the samples in the ring, oldest first, newer than since
// (zero: all). It counts as wanting the tier report.
func (s *Sampler) History(since time.Time) []Sample {
	s.Want()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Sample
	add := func(xs []Sample) {
		for _, x := range xs {
			if !x.Time.IsZero() && x.Time.After(since) {
				out = append(out, x)
			}
		}
	}
	if s.full {
		add(s.ring[s.next:])
	}
	add(s.ring[:s.next])
	return out
}

// Latest is the newest sample (zero before the first).
func (s *Sampler) Latest() (Sample, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.full && s.next == 0 {
		return Sample{}, false
	}
	return s.ring[(s.next-1+len(s.ring))%len(s.ring)], true
}

// subscribe returns a channel receiving each new sample; cancel stops it.
// The channel is closed when the sampler is.
func (s *Sampler) subscribe() (<-chan Sample, func()) {
	ch := make(chan Sample, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		close(ch)
		return ch, func() {}
	}
	s.subs[ch] = struct{}{}
	return ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.subs[ch]; ok {
			delete(s.subs, ch)
			close(ch)
		}
	}
}

// Close ends every live-update stream (the node is shutting down: open
// console pages must not hold the HTTP server's graceful shutdown).
func (s *Sampler) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for ch := range s.subs {
		delete(s.subs, ch)
		close(ch)
	}
}

// tierOrder sorts tiers fastest first (unknown tiers last, by name).
func tierOrder(t string) string {
	switch t {
	case "mem":
		return "0"
	case "ssd":
		return "1"
	case "hdd":
		return "2"
	case "remote":
		return "3"
	}
	return "4" + t
}

// Collector exports the tier report's hot and cold bytes from the last
// sample, so that Prometheus scrapes never scan metadata themselves.
func (s *Sampler) Collector() prometheus.Collector { return samplerCollector{s} }

type samplerCollector struct{ s *Sampler }

var (
	hotDesc = prometheus.NewDesc("terrace_tier_hot_bytes",
		"Replica bytes of egroups read within the access window, per tier (cluster-wide, from the last tier report).", []string{"tier"}, nil)
	coldDesc = prometheus.NewDesc("terrace_tier_cold_bytes",
		"Replica bytes of egroups not read within the access window, per tier (cluster-wide, from the last tier report).", []string{"tier"}, nil)
)

func (c samplerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- hotDesc
	ch <- coldDesc
}

func (c samplerCollector) Collect(ch chan<- prometheus.Metric) {
	c.s.Want() // a scrape wants fresh hot/cold bytes next time
	c.s.mu.Lock()
	tiers := append([]TierReading(nil), c.s.tiers...)
	c.s.mu.Unlock()
	for _, t := range tiers {
		ch <- prometheus.MustNewConstMetric(hotDesc, prometheus.GaugeValue, float64(t.HotBytes), t.Tier)
		ch <- prometheus.MustNewConstMetric(coldDesc, prometheus.GaugeValue, float64(t.ColdBytes), t.Tier)
	}
}
