package onoff

import (
	"context"
	"math/rand/v2"
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
