package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestFormatMs(t *testing.T) {
	for _, tc := range []struct {
		ms   float64
		want string
	}{
		{0, "0"}, {-1, "0"}, {0.0412, "41.2µs"}, {0.5, "500µs"}, {0.00123, "1.23µs"},
		{1, "1.00ms"}, {12.345, "12.3ms"}, {123.4, "123ms"}, {1234, "1.23s"}, {61000, "61.0s"},
	} {
		if got := FormatMs(tc.ms); got != tc.want {
			t.Errorf("FormatMs(%v) = %q, want %q", tc.ms, got, tc.want)
		}
	}
}

func TestFormatRateSizeRatio(t *testing.T) {
	for v, want := range map[float64]string{2130.4: "2130", 423.17: "423", 1.467: "1.47", 0: "0", 55.55: "55.5"} {
		if got := FormatRate(v); got != want {
			t.Errorf("FormatRate(%v) = %q, want %q", v, got, want)
		}
	}
	for n, want := range map[int64]string{512: "512B", 75497472: "72.0MiB", 1536: "1.5KiB", 3 << 30: "3.0GiB"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
	for r, want := range map[float64]string{0.8: "0.80x", 2: "2.00x", 0: "-", 15.3: "15.3x"} {
		if got := FormatRatio(r); got != want {
			t.Errorf("FormatRatio(%v) = %q, want %q", r, got, want)
		}
	}
}

// fakeResult builds a result as Run would: counts, bytes and a histogram of
// latencies for each op, finished over elapsed.
func fakeResult(name string, elapsed time.Duration, ops map[Op][]time.Duration, bytesPerOp int64) *Result {
	r := &Result{Endpoint: name, URL: "http://127.0.0.1:1", Workload: "get=50,put=50", Sizes: "4KiB",
		Concurrency: 16, ElapsedSeconds: elapsed.Seconds(), ClientCPUSeconds: 1.5,
		Total: &OpResult{Op: "total", hist: &Histogram{}}}
	for _, op := range AllOps {
		lats, ok := ops[op]
		if !ok {
			continue
		}
		o := &OpResult{Op: op, hist: &Histogram{}}
		for _, l := range lats {
			o.hist.Record(l)
			o.Count++
			o.Bytes += bytesPerOp
		}
		o.finish(elapsed)
		r.Ops = append(r.Ops, o)
		r.Total.merge(o)
	}
	r.Total.finish(elapsed)
	r.ClientCPUPerOpMs = r.ClientCPUSeconds * 1000 / float64(r.Total.Count)
	return r
}

func repeat(d time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

func TestWriteTable(t *testing.T) {
	r := fakeResult("vgw", 2*time.Second, map[Op][]time.Duration{
		OpPut: repeat(2*time.Millisecond, 1000),
		OpGet: append(repeat(100*time.Microsecond, 3999), time.Second),
	}, 4096)
	r.Server = &ServerResult{PID: 42, CPUSeconds: 2.5, CPUPerOpMs: 0.5, PeakRSSBytes: 72 << 20}
	r.Ops[1].Errors, r.Ops[1].ErrorSamples = 1, []string{"NoSuchKey: The specified key does not exist."}
	var b bytes.Buffer
	if err := WriteTable(&b, r); err != nil {
		t.Fatal(err)
	}
	want := `  endpoint   op   ops  ops/s  MB/s     p50     p90     p99   p99.9     max  errors
       vgw  put  1000    500  2.05  2.00ms  2.00ms  2.00ms  2.00ms  2.00ms       0
       vgw  get  4000   2000  8.19   100µs   100µs   100µs   100µs   1.00s       1
vgw: get=50,put=50, 4KiB objects, 16 clients, 2.00s; client cpu 1.50s (300µs/op); server cpu 2.50s (500µs/op), peak rss 72.0MiB
  get error: NoSuchKey: The specified key does not exist.
`
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestResultJSON(t *testing.T) {
	r := fakeResult("a", time.Second, map[Op][]time.Duration{OpPut: repeat(time.Millisecond, 10)}, 1e6)
	var b bytes.Buffer
	if err := WriteJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	op := back["ops"].([]any)[0].(map[string]any)
	lat := op["latency"].(map[string]any)
	if op["op"] != "put" || op["ops_per_sec"].(float64) != 10 || op["mb_per_sec"].(float64) != 10 || lat["p99_ms"].(float64) != 1 {
		t.Errorf("JSON op = %v", op)
	}
	if strings.Contains(b.String(), "secret") {
		t.Error("JSON mentions a secret")
	}
}

func TestCompareRatiosAndTable(t *testing.T) {
	base := fakeResult("vgw", time.Second, map[Op][]time.Duration{OpPut: repeat(time.Millisecond, 1000)}, 4096)
	base.Server = &ServerResult{CPUPerOpMs: 0.5, PeakRSSBytes: 64 << 20}
	other := fakeResult("terrace", time.Second, map[Op][]time.Duration{OpPut: repeat(2*time.Millisecond, 800)}, 4096)
	other.Server = &ServerResult{CPUPerOpMs: 0.4, PeakRSSBytes: 128 << 20}
	ratios := computeRatios([]*Result{base, other}, "vgw")
	if len(ratios) != 1 {
		t.Fatalf("ratios %+v", ratios)
	}
	ra := ratios[0]
	if ra.Endpoint != "terrace" || ra.Op != OpPut || ra.OpsPerSec != 0.8 || ra.P50 != 2 || ra.ServerCPUPerOp != 0.8 {
		t.Errorf("ratio %+v", ra)
	}
	cr := &CompareResult{Rounds: 2, Baseline: "vgw", Endpoints: []*Result{base, other}, Ratios: ratios,
		RoundOpsPerSec: [][]float64{{900, 1100}, {800, 800}}}
	var b bytes.Buffer
	if err := WriteCompareTable(&b, cr); err != nil {
		t.Fatal(err)
	}
	want := `2 rounds, alternating; ratios are endpoint ÷ vgw
   op  endpoint  ops/s  MB/s     p50     p99  errors  srv cpu/op  peak rss  round spread  ops/s ratio  p50 ratio
  put       vgw   1000  4.10  1.00ms  1.00ms       0       500µs   64.0MiB          ±10%           1x         1x
  put   terrace    800  3.28  2.00ms  2.00ms       0       400µs  128.0MiB           ±0%        0.80x      2.00x
`
	if b.String() != want {
		t.Errorf("compare table:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestMergeResults(t *testing.T) {
	a := fakeResult("x", time.Second, map[Op][]time.Duration{OpGet: repeat(time.Millisecond, 100)}, 10)
	b := fakeResult("x", 3*time.Second, map[Op][]time.Duration{OpGet: repeat(3*time.Millisecond, 300)}, 10)
	a.Server = &ServerResult{CPUSeconds: 1, PeakRSSBytes: 10}
	b.Server = &ServerResult{CPUSeconds: 3, PeakRSSBytes: 30}
	m := mergeResults([]*Result{a, b})
	g := m.Op(OpGet)
	if g.Count != 400 || g.OpsPerSec != 100 || m.ElapsedSeconds != 4 || m.Total.Count != 400 {
		t.Errorf("merged get %+v elapsed %v", g, m.ElapsedSeconds)
	}
	if m.Server.CPUSeconds != 4 || m.Server.PeakRSSBytes != 30 || m.Server.CPUPerOpMs != 10 {
		t.Errorf("merged server %+v", m.Server)
	}
	if p50 := g.Latency.P50Ms; p50 < 2.99 || p50 > 3.01 {
		t.Errorf("merged p50 %v, want 3 ms (300 of 400 samples)", p50)
	}
}
