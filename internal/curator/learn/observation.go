package learn

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Observation is one poll's view of a node: the state s_t of Curator
// §4.3.1 and the client latency that becomes the previous action's reward.
// Rates and latency are averages over the poll interval that just ended.
type Observation struct {
	// CPU and Mem are the node's CPU and memory usage in percent [0, 100].
	CPU float64 `json:"cpu"`
	Mem float64 `json:"mem"`
	// SSDUsage is the used percentage [0, 100] of the fastest local tier,
	// the tier whose tiering the agent schedules.
	SSDUsage float64 `json:"ssd"`
	// IOPS, ReadIOPS and WriteIOPS are client operations per second.
	IOPS      float64 `json:"iops"`
	ReadIOPS  float64 `json:"riops"`
	WriteIOPS float64 `json:"wiops"`
	// LatencyMs is the mean client operation latency in milliseconds and
	// Ops the number of client operations it averages (its weight when the
	// agent averages latency over a longer interval).
	LatencyMs float64 `json:"lat_ms"`
	Ops       float64 `json:"ops"`
	// HDDUsage is the used percentage of the next slower tier (an
	// extension the paper proposes, §4.3.4).
	HDDUsage float64 `json:"hdd"`
}

// Feature names a model may use. The first six are the paper's state.
const (
	FeatCPU       = "cpu"
	FeatMem       = "mem"
	FeatSSD       = "ssd"
	FeatIOPS      = "iops"
	FeatReadIOPS  = "riops"
	FeatWriteIOPS = "wiops"
	FeatLatency   = "lat_ms"
	FeatHDD       = "hdd"
)

// PaperFeatures is the state of Curator §4.3.1: (cpu, mem, ssd, iops,
// riops, wiops).
var PaperFeatures = []string{FeatCPU, FeatMem, FeatSSD, FeatIOPS, FeatReadIOPS, FeatWriteIOPS}

// AllFeatures lists every feature name Value knows, in a fixed order.
var AllFeatures = []string{FeatCPU, FeatMem, FeatSSD, FeatIOPS, FeatReadIOPS, FeatWriteIOPS, FeatLatency, FeatHDD}

func knownFeature(name string) bool {
	for _, f := range AllFeatures {
		if f == name {
			return true
		}
	}
	return false
}

// Value returns the named feature. Unknown names are a programming error
// caught by Model.Validate before any model is used.
func (o Observation) Value(name string) float64 {
	switch name {
	case FeatCPU:
		return o.CPU
	case FeatMem:
		return o.Mem
	case FeatSSD:
		return o.SSDUsage
	case FeatIOPS:
		return o.IOPS
	case FeatReadIOPS:
		return o.ReadIOPS
	case FeatWriteIOPS:
		return o.WriteIOPS
	case FeatLatency:
		return o.LatencyMs
	case FeatHDD:
		return o.HDDUsage
	}
	panic("learn: unknown feature " + name)
}

// Validate rejects observations that would poison a model: non-finite or
// negative values, and percentages above 100 (usage may exceed 100 only
// through a reporting bug upstream).
func (o Observation) Validate() error {
	for _, f := range AllFeatures {
		v := o.Value(f)
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("learn: observation %s=%v: want a finite value ≥ 0", f, v)
		}
	}
	if math.IsNaN(o.Ops) || math.IsInf(o.Ops, 0) || o.Ops < 0 {
		return fmt.Errorf("learn: observation ops=%v: want a finite value ≥ 0", o.Ops)
	}
	for _, f := range []string{FeatCPU, FeatMem, FeatSSD, FeatHDD} {
		if o.Value(f) > 100 {
			return fmt.Errorf("learn: observation %s=%v: a percentage above 100", f, o.Value(f))
		}
	}
	return nil
}

// String prints the observation in the syntax ParseObservation reads.
func (o Observation) String() string {
	var b strings.Builder
	for i, f := range AllFeatures {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%s", f, strconv.FormatFloat(o.Value(f), 'g', 6, 64))
	}
	fmt.Fprintf(&b, " ops=%s", strconv.FormatFloat(o.Ops, 'g', 6, 64))
	return b.String()
}

// ParseObservation reads "name=value" fields separated by spaces (any
// subset; missing fields are zero) and validates the result.
func ParseObservation(s string) (Observation, error) {
	var o Observation
	for _, f := range strings.Fields(s) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return Observation{}, fmt.Errorf("learn: observation field %q: want name=value", f)
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return Observation{}, fmt.Errorf("learn: observation field %q: %v", f, err)
		}
		switch k {
		case FeatCPU:
			o.CPU = x
		case FeatMem:
			o.Mem = x
		case FeatSSD:
			o.SSDUsage = x
		case FeatIOPS:
			o.IOPS = x
		case FeatReadIOPS:
			o.ReadIOPS = x
		case FeatWriteIOPS:
			o.WriteIOPS = x
		case FeatLatency:
			o.LatencyMs = x
		case FeatHDD:
			o.HDDUsage = x
		case "ops":
			o.Ops = x
		default:
			return Observation{}, fmt.Errorf("learn: unknown observation field %q (want one of %s, ops)", k, strings.Join(AllFeatures, ", "))
		}
	}
	return o, o.Validate()
}
