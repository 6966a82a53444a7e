package onoff

import (
	"testing"
	"time"
)

// Only the jobs that started in the execution window count, and runs
// are told apart by their trigger.
func TestExecTiering(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := []byte(`[
 {"trigger":"periodic","start":"2026-01-01T00:00:05Z","tasks_done":{"tier-up":2},"bytes_moved":100},
 {"trigger":"q-learning: run (forced: promotion-starved, 3 promotion(s) refused for room since the last decision) with ssd at 80%, shed 20%","start":"2026-01-01T00:00:10Z","tasks_done":{"tier-down":5},"bytes_moved":500},
 {"trigger":"tier ssd at 76%","start":"2026-01-01T00:00:20Z","tasks_done":{"tier-down":1,"tier-up":1},"bytes_moved":20},
 {"trigger":"q-learning: run (greedy) with ssd at 70%, shed 15%","start":"2026-01-01T00:00:30Z","tasks_done":{"tier-down":7},"bytes_moved":700},
 {"trigger":"periodic","start":"2025-12-31T23:59:59Z","tasks_done":{"tier-up":9},"bytes_moved":900}
]`)
	var mr ModeResult
	execTiering(&mr, h, t0, t0.Add(30*time.Second))
	if mr.ExecUp != 3 || mr.ExecDown != 6 || mr.ExecMovedBytes != 620 || mr.ExecRuns != 2 || mr.ExecStarvedRuns != 1 {
		t.Fatalf("got %+v", mr)
	}
	var bad ModeResult
	execTiering(&bad, []byte("not json"), t0, t0.Add(time.Hour))
	if bad != (ModeResult{}) {
		t.Fatalf("an unparsable history added %+v", bad)
	}
}
