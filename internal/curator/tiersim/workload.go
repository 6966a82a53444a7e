package tiersim

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// The five workloads of Curator Appendix D, built from the OLTP sizes of
// Appendix C (Table 4) and the VDI and DSS descriptions. Figures are the
// paper's for its 4-node cluster; Scale divides them per node and scales
// them down (see Options).

// pattern is how a section picks offsets.
type pattern int

const (
	uniform    pattern = iota // uniform random over the region
	zoned                     // HotShare of accesses to the first HotFrac of the region (fio zoned)
	sequential                // a cursor advancing through the region
)

// sizeMix is a block-size distribution: Bytes[i] with probability P[i].
type sizeMix struct {
	Bytes []int64
	P     []float64
}

var (
	oltpSizes = sizeMix{Bytes: []int64{8 << 10, 32 << 10}, P: []float64{0.9, 0.1}}
	only8k    = sizeMix{Bytes: []int64{8 << 10}, P: []float64{1}}
	only32k   = sizeMix{Bytes: []int64{32 << 10}, P: []float64{1}}
	only1m    = sizeMix{Bytes: []int64{1 << 20}, P: []float64{1}}
)

// access describes one kind of operation on a section.
type access struct {
	// Share of the section's IOPS.
	Share float64
	Write bool
	Sizes sizeMix
	// RandomFrac of operations are random (per Pattern); the rest are
	// sequential. Lo and Hi bound the region within each unit (fractions of
	// the unit: VDI reads the first 8 GB of each 10 GB VM disk).
	RandomFrac float64
	Pattern    pattern
	HotFrac    float64
	HotShare   float64
	Lo, Hi     float64
}

// section is a data or log area: SizeGB and IOPS over the whole cluster.
type section struct {
	Name   string
	SizeGB float64
	IOPS   float64
	// Units splits the section into equal independent disks (VDI VMs);
	// each access picks a unit uniformly. 0 or 1: one unit.
	Units    int
	Accesses []access
}

// phase is a period during which some sections are active.
type phase struct {
	Active []string
	Length time.Duration // 0: until the end
}

// Workload is one Appendix D workload.
type Workload struct {
	Name     string
	About    string
	Sections []section
	Phases   []phase // cycled
}

// oltpData is an OLTP Data section: random 50/50 reads and writes, 90 %
// 8k / 10 % 32k blocks (Appendix C).
func oltpData(name string, sizeGB, iops float64) section {
	return section{Name: name, SizeGB: sizeGB, IOPS: iops, Accesses: []access{
		{Share: 0.5, Sizes: oltpSizes, RandomFrac: 1, Pattern: uniform, Hi: 1},
		{Share: 0.5, Write: true, Sizes: oltpSizes, RandomFrac: 1, Pattern: uniform, Hi: 1},
	}}
}

// logSection is a Log section: write only, 10 % random, all 32k.
func logSection(name string, sizeGB, iops float64) section {
	return section{Name: name, SizeGB: sizeGB, IOPS: iops, Accesses: []access{
		{Share: 1, Write: true, Sizes: only32k, RandomFrac: 0.1, Pattern: uniform, Hi: 1},
	}}
}

// Workloads are the five Appendix D workloads by name.
var Workloads = map[string]Workload{
	"oltp": {
		Name:  "oltp",
		About: "OLTP large: data 1120 GB at 8000 IOPS (50/50 random reads/writes, 8k/32k), log 12 GB at 400 IOPS",
		Sections: []section{
			oltpData("data", 1120, 8000),
			logSection("log", 12, 400),
		},
		Phases: []phase{{Active: []string{"data", "log"}}},
	},
	"oltp-skewed": {
		Name:  "oltp-skewed",
		About: "read-only 8k data, 90 % of reads to 10 % of a 4480 GB working set, 32000 IOPS; OLTP large log",
		Sections: []section{
			{Name: "data", SizeGB: 4480, IOPS: 32000, Accesses: []access{
				{Share: 1, Sizes: only8k, RandomFrac: 1, Pattern: zoned, HotFrac: 0.1, HotShare: 0.9, Hi: 1},
			}},
			logSection("log", 12, 400),
		},
		Phases: []phase{{Active: []string{"data", "log"}}},
	},
	"oltp-varying": {
		Name:  "oltp-varying",
		About: "OLTP medium (1120 GB, 6000 IOPS) and small (800 GB, 4000 IOPS) alternating every 20 minutes",
		Sections: []section{
			oltpData("medium", 1120, 6000),
			logSection("medium-log", 16, 300),
			oltpData("small", 800, 4000),
			logSection("small-log", 16, 200),
		},
		Phases: []phase{
			{Active: []string{"medium", "medium-log"}, Length: 20 * time.Minute},
			{Active: []string{"small", "small-log"}, Length: 20 * time.Minute},
		},
	},
	"oltp-vdi": {
		Name:  "oltp-vdi",
		About: "OLTP large on one node, 100 VDI VMs (10 GB, 26 IOPS each) on each of the other three",
		Sections: []section{
			oltpData("data", 1120, 8000),
			logSection("log", 12, 400),
			// 300 VMs: reads in the first 8 GB of each (80 % random,
			// 8k/32k), writes in the last 2 GB (20 % random, 32k), 13
			// IOPS each.
			{Name: "vdi", SizeGB: 3000, IOPS: 300 * 26, Units: 300, Accesses: []access{
				{Share: 0.5, Sizes: oltpSizes, RandomFrac: 0.8, Pattern: uniform, Lo: 0, Hi: 0.8},
				{Share: 0.5, Write: true, Sizes: only32k, RandomFrac: 0.2, Pattern: uniform, Lo: 0.8, Hi: 1},
			}},
		},
		Phases: []phase{{Active: []string{"data", "log", "vdi"}}},
	},
	"oltp-dss": {
		Name:  "oltp-dss",
		About: "OLTP medium and DSS (448 GB sequential 1 MB reads at 2880 IOPS, 16 GB log at 800 IOPS) alternating every 20 minutes",
		Sections: []section{
			oltpData("medium", 1120, 6000),
			logSection("medium-log", 16, 300),
			{Name: "dss", SizeGB: 448, IOPS: 2880, Accesses: []access{
				{Share: 1, Sizes: only1m, RandomFrac: 0, Pattern: uniform, Hi: 1},
			}},
			logSection("dss-log", 16, 800),
		},
		Phases: []phase{
			{Active: []string{"medium", "medium-log"}, Length: 20 * time.Minute},
			{Active: []string{"dss", "dss-log"}, Length: 20 * time.Minute},
		},
	},
}

// WorkloadNames lists the workloads in Table 1's order.
var WorkloadNames = []string{"oltp", "oltp-skewed", "oltp-varying", "oltp-vdi", "oltp-dss"}

// LookupWorkloads resolves names ("all" or empty: every workload).
func LookupWorkloads(names []string) ([]Workload, error) {
	if len(names) == 0 || len(names) == 1 && names[0] == "all" {
		names = WorkloadNames
	}
	var out []Workload
	for _, n := range names {
		w, ok := Workloads[strings.TrimSpace(n)]
		if !ok {
			known := append([]string(nil), WorkloadNames...)
			sort.Strings(known)
			return nil, fmt.Errorf("tiersim: unknown workload %q (want one of %s, or all)", n, strings.Join(known, ", "))
		}
		out = append(out, w)
	}
	return out, nil
}

// activeAt returns the phase index at offset t into the execution.
func (w Workload) activeAt(t time.Duration) int {
	var cycle time.Duration
	for _, p := range w.Phases {
		if p.Length == 0 {
			return 0
		}
		cycle += p.Length
	}
	t %= cycle
	for i, p := range w.Phases {
		if t < p.Length {
			return i
		}
		t -= p.Length
	}
	return 0
}
