package console

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"
)

// countingSource is a source whose counters the test advances; the
// sampler's ring and rate arithmetic are what is under test (the real
// node's source is exercised by the server and browser tests).
type countingSource struct {
	devs       []DeviceReading
	tiers      []TierReading
	tierErr    error
	tierCalls  int
	latency    time.Duration
	baselineNs time.Duration
}

func (c *countingSource) Devices() []DeviceReading { return append([]DeviceReading(nil), c.devs...) }
func (c *countingSource) Tiers(context.Context) ([]TierReading, error) {
	c.tierCalls++
	return c.tiers, c.tierErr
}
func (c *countingSource) Latency() (time.Duration, time.Duration) { return c.latency, c.baselineNs }

func TestSamplerRatesAndUsage(t *testing.T) {
	src := &countingSource{
		devs: []DeviceReading{
			{ID: "n1/ssd0", Tier: "ssd", CapacityBytes: 100, UsedBytes: 10, Local: true},
			{ID: "n1/hdd0", Tier: "hdd", CapacityBytes: 1000, UsedBytes: 100, Local: true},
			{ID: "n2/hdd0", Tier: "hdd", CapacityBytes: 1000, UsedBytes: 300, ReadBytes: 1 << 40}, // remote: no counters
		},
		tiers:   []TierReading{{Tier: "hdd", HotBytes: 7, ColdBytes: 93}},
		latency: 3 * time.Millisecond,
	}
	s := NewSampler(src, time.Second, 10*time.Second, 100)
	t0 := time.Unix(1_800_000_000, 0)
	s.Want()
	first := s.Take(context.Background(), t0)
	if len(first.Tiers) != 2 || first.Tiers[0].Tier != "ssd" || first.Tiers[1].Tier != "hdd" {
		t.Fatalf("tiers %+v, want ssd then hdd", first.Tiers)
	}
	hdd := first.Tiers[1]
	if hdd.CapacityBytes != 2000 || hdd.UsedBytes != 400 || hdd.HotBytes != 7 || hdd.ColdBytes != 93 || hdd.ReadBps != 0 {
		t.Errorf("first hdd sample %+v", hdd)
	}
	// 2 s later: ssd read 4 MB, hdd wrote 1 MB, the remote device's
	// counters are ignored.
	src.devs[0].ReadBytes = 4e6
	src.devs[1].WriteBytes = 1e6
	src.devs[2].ReadBytes += 1e9
	src.devs[0].UsedBytes = 50
	sm := s.Take(context.Background(), t0.Add(2*time.Second))
	if got := sm.Tiers[0]; got.ReadBps != 2e6 || got.WriteBps != 0 || got.UsedBytes != 50 {
		t.Errorf("ssd %+v, want 2 MB/s read and 50 bytes used", got)
	}
	if got := sm.Tiers[1]; got.WriteBps != 5e5 || got.ReadBps != 0 {
		t.Errorf("hdd %+v, want 0.5 MB/s write and no read", got)
	}
	if math.Abs(sm.LatencySeconds-0.003) > 1e-12 {
		t.Errorf("latency %v", sm.LatencySeconds)
	}
	// A restarted counter is not negative throughput.
	src.devs[0].ReadBytes = 0
	if sm := s.Take(context.Background(), t0.Add(3*time.Second)); sm.Tiers[0].ReadBps != 0 {
		t.Errorf("after a counter reset: %v B/s", sm.Tiers[0].ReadBps)
	}
	// The tier report was read once so far (every 10 s).
	if src.tierCalls != 1 {
		t.Errorf("tier report read %d times in 3 s, want 1", src.tierCalls)
	}
	src.tierErr = errors.New("metadata unavailable")
	s.Want()
	sm = s.Take(context.Background(), t0.Add(11*time.Second))
	if src.tierCalls != 2 || sm.TiersError != "metadata unavailable" || sm.Tiers[1].HotBytes != 7 {
		t.Errorf("failed tier report: calls %d, sample %+v (want the error and the last good hot bytes)", src.tierCalls, sm)
	}
}

func TestSamplerRingIsBounded(t *testing.T) {
	src := &countingSource{devs: []DeviceReading{{ID: "d", Tier: "hdd", CapacityBytes: 1, Local: true}}}
	s := NewSampler(src, time.Second, time.Second, 5)
	if _, ok := s.Latest(); ok {
		t.Fatal("a latest sample before any was taken")
	}
	t0 := time.Unix(1_800_000_000, 0)
	for i := range 12 {
		s.Take(context.Background(), t0.Add(time.Duration(i)*time.Second))
		h := s.History(time.Time{})
		if want := min(i+1, 5); len(h) != want {
			t.Fatalf("after %d samples the ring holds %d, want %d", i+1, len(h), want)
		}
		for j := 1; j < len(h); j++ {
			if !h[j].Time.After(h[j-1].Time) {
				t.Fatalf("history out of order: %v", h)
			}
		}
		if last, _ := s.Latest(); !last.Time.Equal(t0.Add(time.Duration(i) * time.Second)) {
			t.Fatalf("latest %v", last.Time)
		}
	}
	h := s.History(t0.Add(9 * time.Second))
	if len(h) != 2 || !h[0].Time.Equal(t0.Add(10*time.Second)) {
		t.Errorf("history since 9 s: %v", h)
	}
}

func TestSamplerSubscribers(t *testing.T) {
	src := &countingSource{}
	s := NewSampler(src, time.Second, time.Second, 3)
	ch, cancel := s.subscribe()
	t0 := time.Unix(1_800_000_000, 0)
	s.Take(context.Background(), t0)
	s.Take(context.Background(), t0.Add(time.Second)) // the slow reader misses it; sampling does not block
	if got := <-ch; !got.Time.Equal(t0) {
		t.Errorf("subscriber got %v", got.Time)
	}
	cancel()
	s.Take(context.Background(), t0.Add(2*time.Second))
	if got, ok := <-ch; ok {
		t.Errorf("a cancelled subscriber got %v", got.Time)
	}
	// Close (node shutdown) ends every stream, and later ones at once.
	ch2, cancel2 := s.subscribe()
	s.Close()
	if _, ok := <-ch2; ok {
		t.Error("a stream outlived Close")
	}
	cancel2()
	if _, ok := <-func() <-chan Sample { c, _ := s.subscribe(); return c }(); ok {
		t.Error("a stream opened after Close")
	}
}

// TestSamplerReadsTierReportOnlyWhenWatched: the tier report scans
// metadata, so nobody looking means no scan.
func TestSamplerReadsTierReportOnlyWhenWatched(t *testing.T) {
	src := &countingSource{tiers: []TierReading{{Tier: "hdd", HotBytes: 1}}}
	s := NewSampler(src, time.Second, 5*time.Second, 100)
	t0 := time.Unix(1_800_000_000, 0)
	at := func(sec int) { s.Take(context.Background(), t0.Add(time.Duration(sec)*time.Second)) }
	for i := range 20 {
		at(i)
	}
	if src.tierCalls != 0 {
		t.Fatalf("tier report read %d times with nobody looking", src.tierCalls)
	}
	s.History(time.Time{}) // a console page
	for i := 20; i < 40; i++ {
		at(i)
	}
	// Read at 20 and 25; the want lapses after two slow intervals.
	if src.tierCalls != 2 {
		t.Errorf("after one look: %d tier reads, want 2", src.tierCalls)
	}
	_, cancel := s.subscribe() // an open page keeps it wanted
	for i := 40; i < 60; i++ {
		at(i)
	}
	cancel()
	if src.tierCalls != 6 {
		t.Errorf("with a page open for 20 s: %d tier reads in all, want 6", src.tierCalls)
	}
}
