package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"text/tabwriter"
	"time"
)

// OpResult is what one operation type did during a timed phase.
type OpResult struct {
	Op Op `json:"op"`
	// Count is the number of requests that completed, failed ones included.
	Count int64 `json:"count"`
	// Errors counts failed requests, VerifyFailures among them.
	Errors         int64 `json:"errors"`
	VerifyFailures int64 `json:"verify_failures"`
	// Bytes moved by successful requests (request bodies for PUT, response
	// bodies for GET).
	Bytes     int64          `json:"bytes"`
	OpsPerSec float64        `json:"ops_per_sec"`
	MBPerSec  float64        `json:"mb_per_sec"` // 10^6 bytes per second
	Latency   LatencySummary `json:"latency"`
	// ErrorSamples holds up to 5 distinct error messages.
	ErrorSamples []string `json:"error_samples,omitempty"`

	hist *Histogram
}

// ServerResult is a local server's resource use, from /proc.
type ServerResult struct {
	PID int `json:"pid"`
	// Processes is how many server processes the numbers sum (the nodes
	// of a local cluster; 1 for one server).
	Processes int `json:"processes,omitempty"`
	// CPUSeconds is the server's user+system CPU during the timed phase.
	CPUSeconds float64 `json:"cpu_seconds"`
	// CPUPerOpMs is CPUSeconds per completed operation, in milliseconds.
	CPUPerOpMs float64 `json:"cpu_per_op_ms"`
	// PeakRSSBytes is the server's peak resident memory since it started
	// (VmHWM), read at the end of the timed phase.
	PeakRSSBytes int64 `json:"peak_rss_bytes"`
	// RSSBytes is the resident memory at the end of the timed phase.
	RSSBytes int64 `json:"rss_bytes"`
}

// Result is the report of one timed phase against one endpoint.
type Result struct {
	Endpoint    string    `json:"endpoint"`
	URL         string    `json:"url"`
	Workload    string    `json:"workload"`
	Sizes       string    `json:"sizes"`
	Concurrency int       `json:"concurrency"`
	Options     string    `json:"options"`
	Start       time.Time `json:"start"`
	// ElapsedSeconds is the wall time of the timed phase.
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	// Ops has one entry per operation in the workload, in report order.
	Ops []*OpResult `json:"ops"`
	// Total sums all operations.
	Total *OpResult `json:"total"`
	// ClientCPUSeconds is this process's user+system CPU during the timed
	// phase (getrusage). An in-process server's CPU is included.
	ClientCPUSeconds float64 `json:"client_cpu_seconds"`
	// ClientCPUPerOpMs is ClientCPUSeconds per completed operation.
	ClientCPUPerOpMs float64       `json:"client_cpu_per_op_ms"`
	Server           *ServerResult `json:"server,omitempty"`
	// Meta is the metadata work per operation when the endpoint names
	// its nodes' admin URLs (metrics=…).
	Meta *MetaResult `json:"meta,omitempty"`
	// Notes explain anything unusual (an early stop, a failed /proc read).
	Notes []string `json:"notes,omitempty"`
}

// Op returns the entry for op, or nil.
func (r *Result) Op(op Op) *OpResult {
	for _, o := range r.Ops {
		if o.Op == op {
			return o
		}
	}
	return nil
}

// finish computes the rates and summaries from counts and histograms.
func (o *OpResult) finish(elapsed time.Duration) {
	if s := elapsed.Seconds(); s > 0 {
		o.OpsPerSec = float64(o.Count) / s
		o.MBPerSec = float64(o.Bytes) / s / 1e6
	}
	if o.hist != nil {
		o.Latency = o.hist.Summary()
	}
}

func (o *OpResult) merge(x *OpResult) {
	o.Count += x.Count
	o.Errors += x.Errors
	o.VerifyFailures += x.VerifyFailures
	o.Bytes += x.Bytes
	if x.hist != nil {
		if o.hist == nil {
			o.hist = &Histogram{}
		}
		o.hist.Merge(x.hist)
	}
	for _, e := range x.ErrorSamples {
		o.addErrorSample(e)
	}
}

const maxErrorSamples = 5

func (o *OpResult) addErrorSample(s string) {
	if len(o.ErrorSamples) >= maxErrorSamples {
		return
	}
	for _, e := range o.ErrorSamples {
		if e == s {
			return
		}
	}
	o.ErrorSamples = append(o.ErrorSamples, s)
}

// WriteJSON writes v as indented JSON.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// WriteTable prints results as an aligned table, one row per operation per
// result, followed by resource use and any error samples.
func WriteTable(w io.Writer, results ...*Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "endpoint\top\tops\tops/s\tMB/s\tp50\tp90\tp99\tp99.9\tmax\terrors\t")
	for _, r := range results {
		for _, o := range r.Ops {
			l := o.Latency
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n",
				r.Endpoint, o.Op, o.Count, FormatRate(o.OpsPerSec), FormatRate(o.MBPerSec),
				FormatMs(l.P50Ms), FormatMs(l.P90Ms), FormatMs(l.P99Ms), FormatMs(l.P999Ms), FormatMs(l.MaxMs), o.Errors)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range results {
		fmt.Fprintf(w, "%s: %s, %s objects, %d clients, %.2fs; client cpu %.2fs (%s/op)",
			r.Endpoint, r.Workload, r.Sizes, r.Concurrency, r.ElapsedSeconds, r.ClientCPUSeconds, FormatMs(r.ClientCPUPerOpMs))
		if s := r.Server; s != nil {
			procs := ""
			if s.Processes > 1 {
				procs = fmt.Sprintf(" over %d processes", s.Processes)
			}
			fmt.Fprintf(w, "; server cpu%s %.2fs (%s/op), peak rss %s", procs, s.CPUSeconds, FormatMs(s.CPUPerOpMs), FormatSize(s.PeakRSSBytes))
		}
		if m := r.Meta; m != nil {
			fmt.Fprintf(w, "; metadata per op: %.2f reads, %.2f commits, %.2f store txns", m.ReadsPerOp, m.CommitsPerOp, m.TxnsPerOp)
		}
		fmt.Fprintln(w)
		for _, o := range r.Ops {
			if o.VerifyFailures > 0 {
				fmt.Fprintf(w, "  %s: %d GET bodies failed verification\n", o.Op, o.VerifyFailures)
			}
			for _, e := range o.ErrorSamples {
				fmt.Fprintf(w, "  %s error: %s\n", o.Op, e)
			}
		}
		for _, n := range r.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
	}
	return nil
}

// FormatMs prints a latency in milliseconds with three significant digits
// and a unit that keeps it short: 0.0412ms → "41.2µs", 12.34 → "12.3ms",
// 1234 → "1.23s".
func FormatMs(ms float64) string {
	switch {
	case ms <= 0 || math.IsNaN(ms):
		return "0"
	case ms < 1:
		return sig3(ms*1000) + "µs"
	case ms < 1000:
		return sig3(ms) + "ms"
	default:
		return sig3(ms/1000) + "s"
	}
}

// FormatRate prints a rate with three significant digits, or as a whole
// number from 1000 up (2130.4 → "2130", 423.17 → "423", 1.467 → "1.47").
func FormatRate(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.0f", v)
	}
	if v <= 0 || math.IsNaN(v) {
		return "0"
	}
	return sig3(v)
}

func sig3(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// FormatSize prints a byte count in binary units with one decimal:
// 75497472 → "72.0MiB".
func FormatSize(n int64) string {
	f := float64(n)
	for _, u := range []string{"B", "KiB", "MiB", "GiB"} {
		if f < 1024 || u == "GiB" {
			if u == "B" {
				return fmt.Sprintf("%dB", n)
			}
			return fmt.Sprintf("%.1f%s", f, u)
		}
		f /= 1024
	}
	return ""
}

// FormatRatio prints a ratio as "1.23x", or "-" when undefined.
func FormatRatio(r float64) string {
	if r <= 0 || math.IsNaN(r) || math.IsInf(r, 0) {
		return "-"
	}
	return sig3(r) + "x"
}

func secondsDuration(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
