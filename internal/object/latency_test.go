package object

import (
	"testing"
	"time"
)

// TestClientLatencyRelaxesWhenIdle: the last operations before clients
// stop were slow (a node was down). With no client left, background work
// must not stay throttled: recent relaxes to the baseline with idle time,
// while it still reads high right after the slow operations.
func TestClientLatencyRelaxesWhenIdle(t *testing.T) {
	var lt latencyTracker
	t0 := time.Unix(1_800_000_000, 0)
	for i := 0; i < 100; i++ { // a quiet minute: the baseline
		lt.observe(t0.Add(time.Duration(i)*100*time.Millisecond), time.Millisecond)
	}
	t1 := t0.Add(2 * time.Minute)
	for i := 0; i < 30; i++ { // then slow operations, and silence
		lt.observe(t1.Add(time.Duration(i)*10*time.Millisecond), 40*time.Millisecond)
	}
	last := t1.Add(290 * time.Millisecond)
	congested := func(at time.Time) bool {
		r, b := lt.getAt(at)
		return b > 0 && r > 2*b
	}
	if r, b := lt.getAt(last); b != time.Millisecond || !congested(last) {
		t.Fatalf("right after slow operations: recent %v baseline %v, want congested over a 1ms baseline", r, b)
	}
	if !congested(last.Add(500 * time.Millisecond)) {
		t.Fatal("a half-second pause between operations already reads as idle")
	}
	if r, b := lt.getAt(last.Add(15 * time.Second)); r > 2*b {
		t.Fatalf("15 s without a client operation: recent %v over baseline %v still throttles background work", r, b)
	}
	// A new operation counts at once, from the relaxed average: one slow
	// operation after the pause does not bring the old slowness back.
	lt.observe(last.Add(20*time.Second), 40*time.Millisecond)
	if r, b := lt.getAt(last.Add(20 * time.Second)); r <= b || r > 2*b+4*time.Millisecond+time.Millisecond/2 {
		t.Fatalf("after one slow operation following the pause: recent %v baseline %v, want about 1ms + 0.1×39ms", r, b)
	}
}
