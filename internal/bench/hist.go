package bench

import (
	"math"
	"math/bits"
	"time"
)

// Histogram records latencies in a log-linear bucket array: values below 256 ns
// are exact, larger ones fall in one of 128 equal sub-buckets per power of
// two, so a reported quantile is within 1/256 (0.4 %) of a recorded value
// (the bucket midpoint is reported). Memory is fixed (58 KiB), however many
// operations are recorded, and histograms from several workers merge exactly.
//
// A Histogram is not safe for concurrent use: each worker owns one and they
// are merged at the end.
type Histogram struct {
	counts []uint64
	n      uint64
	sumNs  float64
	min    int64
	max    int64
}

const (
	histSubBits = 7
	histSub     = 1 << histSubBits
	// 64-bit values need exponents up to 56 above the exact range.
	histBuckets = (64 - histSubBits) * histSub
)

func histIndex(v int64) int {
	if v < 2*histSub {
		return int(v)
	}
	e := bits.Len64(uint64(v)) - histSubBits - 1
	return (e+1)*histSub + int(uint64(v)>>e) - histSub
}

// histBucket returns the lowest value of bucket i and its width.
func histBucket(i int) (lo, width int64) {
	if i < 2*histSub {
		return int64(i), 1
	}
	e := i/histSub - 1
	m := int64(i%histSub + histSub)
	return m << e, 1 << e
}

// Record adds one latency. Negative durations count as zero.
func (h *Histogram) Record(d time.Duration) {
	v := max(int64(d), 0)
	if h.counts == nil {
		h.counts = make([]uint64, histBuckets)
	}
	h.counts[histIndex(v)]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.sumNs += float64(v)
}

// Merge adds all of o's samples to h.
func (h *Histogram) Merge(o *Histogram) {
	if o == nil || o.n == 0 {
		return
	}
	if h.counts == nil {
		h.counts = make([]uint64, histBuckets)
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sumNs += o.sumNs
}

// Count is the number of recorded samples.
func (h *Histogram) Count() uint64 { return h.n }

// Min is the smallest sample (exact).
func (h *Histogram) Min() time.Duration { return time.Duration(h.min) }

// Max is the largest sample (exact).
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Mean is the exact arithmetic mean.
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sumNs / float64(h.n))
}

// Quantile returns the nearest-rank q-quantile (0 < q ≤ 1): the smallest
// recorded value v such that at least ⌈q·n⌉ samples are ≤ v, up to the
// bucket resolution. Quantile(1) is the exact maximum. An empty histogram
// returns 0.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	if q >= 1 {
		return time.Duration(h.max)
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	var cum uint64
	for i, c := range h.counts {
		cum += c
		if cum >= rank {
			lo, w := histBucket(i)
			v := lo + (w-1)/2
			v = min(max(v, h.min), h.max)
			return time.Duration(v)
		}
	}
	return time.Duration(h.max)
}

// LatencySummary is the latency part of a report, in milliseconds.
type LatencySummary struct {
	MinMs  float64 `json:"min_ms"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P90Ms  float64 `json:"p90_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
}

// Summary reduces the histogram to the reported percentiles.
func (h *Histogram) Summary() LatencySummary {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return LatencySummary{
		MinMs:  ms(h.Min()),
		MeanMs: ms(h.Mean()),
		P50Ms:  ms(h.Quantile(0.50)),
		P90Ms:  ms(h.Quantile(0.90)),
		P99Ms:  ms(h.Quantile(0.99)),
		P999Ms: ms(h.Quantile(0.999)),
		MaxMs:  ms(h.Max()),
	}
}
