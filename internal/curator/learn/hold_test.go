package learn

import (
	"math/rand/v2"
	"testing"
	"time"
)

// SetModel (a Curator master restoring the saved model) keeps the later of
// two holds: the saved model's last run holds an agent that has not run
// since, and a run of the agent's own after the saved one is neither
// forgotten nor dropped from the model it will save.
func TestSetModelKeepsTheLaterHold(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	newModel := func(lastRun time.Time) *Model {
		m, err := NewModel([]string{FeatSSD}, PaperActions, []float64{50}, []float64{10})
		if err != nil {
			t.Fatal(err)
		}
		m.Epsilon, m.LastRun = 0, lastRun
		return m
	}
	a, err := NewAgent(newModel(time.Time{}), AgentOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 0))
	if _, err := a.Step(t0.Add(time.Minute), Observation{SSDUsage: 80}, 1, rng); err != nil { // a run at 1m
		t.Fatal(err)
	}
	// The store holds an earlier run: this agent's own, later one stays.
	if err := a.SetModel(newModel(t0)); err != nil {
		t.Fatal(err)
	}
	if got := a.Model().LastRun; !got.Equal(t0.Add(time.Minute)) {
		t.Fatalf("after restoring a model that ran at 0, last run %v, want the agent's own at 1m", got)
	}
	if !a.Holding(t0.Add(DefaultHold)) || a.Holding(t0.Add(DefaultHold+time.Minute)) {
		t.Fatalf("want the hold of the run at 1m: holding at 10m %v, at 11m %v", a.Holding(t0.Add(DefaultHold)), a.Holding(t0.Add(DefaultHold+time.Minute)))
	}
	// The store holds a later run (another master's): its hold applies.
	if err := a.SetModel(newModel(t0.Add(5 * time.Minute))); err != nil {
		t.Fatal(err)
	}
	if !a.Holding(t0.Add(DefaultHold+4*time.Minute)) || a.Holding(t0.Add(DefaultHold+5*time.Minute)) {
		t.Fatalf("want the hold of the other master's run at 5m: holding at 14m %v, at 15m %v",
			a.Holding(t0.Add(DefaultHold+4*time.Minute)), a.Holding(t0.Add(DefaultHold+5*time.Minute)))
	}
	if d, err := a.Step(t0.Add(DefaultHold+4*time.Minute), Observation{SSDUsage: 80}, NoForce, rng); err != nil || !d.Held {
		t.Fatalf("step inside the other master's hold: %v, %v; want held", d, err)
	}
}
