package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// nearestRank is the reference definition: the ⌈q·n⌉-th smallest sample.
func nearestRank(sorted []int64, q float64) int64 {
	r := int(math.Ceil(q * float64(len(sorted))))
	return sorted[max(r, 1)-1]
}

func TestHistogramExactSmallValues(t *testing.T) {
	// Below 256 ns every value has its own bucket, so quantiles are exact.
	var h Histogram
	var vals []int64
	for i := int64(1); i <= 200; i++ {
		h.Record(time.Duration(i))
		vals = append(vals, i)
	}
	for _, q := range []float64{0.01, 0.5, 0.9, 0.99, 0.999, 1} {
		if got, want := int64(h.Quantile(q)), nearestRank(vals, q); got != want {
			t.Errorf("Quantile(%v) = %d, want %d", q, got, want)
		}
	}
	if h.Min() != 1 || h.Max() != 200 || h.Count() != 200 {
		t.Errorf("min %d max %d count %d", h.Min(), h.Max(), h.Count())
	}
	if h.Mean() != time.Duration(100) { // (1+200)/2 = 100.5, truncated
		t.Errorf("mean %d", h.Mean())
	}
}

func TestHistogramRelativeError(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h Histogram
	var vals []int64
	for range 100_000 {
		// Log-uniform from 1 µs to 10 s, like real latencies.
		v := int64(math.Exp(rng.Float64()*math.Log(1e7)) * 1e3)
		h.Record(time.Duration(v))
		vals = append(vals, v)
	}
	slices.Sort(vals)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		got, want := float64(h.Quantile(q)), float64(nearestRank(vals, q))
		if rel := math.Abs(got-want) / want; rel > 1.0/256 {
			t.Errorf("Quantile(%v) = %.0f, exact %.0f, error %.4f > 1/256", q, got, want, rel)
		}
	}
	if int64(h.Quantile(1)) != vals[len(vals)-1] || int64(h.Min()) != vals[0] {
		t.Error("max/min not exact")
	}
}

func TestHistogramBucketsRoundTrip(t *testing.T) {
	for _, v := range []int64{0, 1, 255, 256, 257, 511, 512, 1000, 1 << 20, 1<<40 + 12345, math.MaxInt64} {
		i := histIndex(v)
		lo, w := histBucket(i)
		if v < lo || v-lo >= w {
			t.Errorf("value %d in bucket %d = [%d, %d+%d)", v, i, lo, lo, w)
		}
		if i >= histBuckets {
			t.Errorf("value %d index %d out of range", v, i)
		}
	}
}

func TestHistogramMerge(t *testing.T) {
	var a, b, all Histogram
	for i := range 1000 {
		d := time.Duration(i*i + 7)
		all.Record(d)
		if i%3 == 0 {
			a.Record(d)
		} else {
			b.Record(d)
		}
	}
	var m Histogram
	m.Merge(&a)
	m.Merge(&b)
	m.Merge(nil)
	m.Merge(&Histogram{})
	if m.Summary() != all.Summary() || m.Count() != all.Count() {
		t.Errorf("merged %+v, want %+v", m.Summary(), all.Summary())
	}
}

func TestHistogramEmpty(t *testing.T) {
	var h Histogram
	if h.Quantile(0.5) != 0 || h.Mean() != 0 || h.Summary() != (LatencySummary{}) {
		t.Error("empty histogram should report zeros")
	}
	h.Record(-5) // clamped to zero
	if h.Max() != 0 || h.Count() != 1 {
		t.Error("negative sample")
	}
}

func TestLatencySummaryUnits(t *testing.T) {
	var h Histogram
	h.Record(1500 * time.Microsecond)
	s := h.Summary()
	if math.Abs(s.P50Ms-1.5) > 1.5/256 || s.MaxMs != 1.5 {
		t.Errorf("summary %+v, want 1.5 ms", s)
	}
}
