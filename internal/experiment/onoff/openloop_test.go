package onoff

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
)

// Arrivals keep their schedule when the system under test is slow: with one
// slot and operations slower than the arrival gap, later operations wait,
// and their latency counts from arrival, growing well past the service
// time (no coordinated omission).
func TestOpenLoopCountsQueueingFromArrival(t *testing.T) {
	o := Options{Rate: 200, MaxInFlight: 1, Seed: 3}
	const service = 20 * time.Millisecond
	var mu sync.Mutex
	var lat []time.Duration
	deadline := time.Now().Add(300 * time.Millisecond)
	openLoop(context.Background(), o, deadline, func(_ *rand.Rand, arrival time.Time) {
		time.Sleep(service)
		mu.Lock()
		lat = append(lat, time.Since(arrival))
		mu.Unlock()
	})
	// ≈ 60 arrivals in 300 ms; every one is served (the loop waits for them).
	if len(lat) < 30 || len(lat) > 120 {
		t.Fatalf("%d operations for 200/s over 300 ms", len(lat))
	}
	var maxLat time.Duration
	for _, l := range lat {
		maxLat = max(maxLat, l)
	}
	// Served one at a time at 20 ms each, the last arrivals wait for most
	// of the backlog: far more than one service time.
	if maxLat < 10*service {
		t.Fatalf("max latency %s: queueing behind the single slot was not counted", maxLat)
	}
}

func TestOpenLoopStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	n := 0
	openLoop(ctx, Options{Rate: 1000, MaxInFlight: 4, Seed: 1}, time.Now().Add(time.Hour), func(*rand.Rand, time.Time) { n++ })
	if n > 4 {
		t.Fatalf("%d operations after cancel", n)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(*Options)
		want string
	}{
		{"negative rate", func(o *Options) { o.Rate = -1 }, "negative"},
		{"warm-up as long as execution", func(o *Options) { o.Exec, o.Warmup = time.Minute, time.Minute }, "warm-up"},
		{"one node", func(o *Options) { o.Nodes = 1 }, "at least 2"},
		{"bad mode", func(o *Options) { o.Modes = []string{"on", "maybe"} }, "unknown mode"},
		{"tiny egroups", func(o *Options) { o.EgroupBytes = 4096 }, "egroup"},
		{"unknown hdd profile", func(o *Options) { o.HDDProfile = "floppy" }, "hdd emulation profile"},
		{"hdd sped up", func(o *Options) { o.HDDProfile = "hdd/0.5" }, "hdd emulation profile"},
	} {
		o := Options{}
		c.set(&o)
		o.EnsureDefaults()
		err := o.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
	o := Options{Rate: 180, Warmup: 90 * time.Second, Exec: 150 * time.Second}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		t.Fatalf("the documented run: %v", err)
	}
	o.HDDProfile = "hdd/6"
	if err := o.Validate(); err != nil || hddSpec(o) != "hdd:hdd0:1073741824:hdd/6" {
		t.Fatalf("a slowed hdd: %v, spec %q", err, hddSpec(o))
	}
}
