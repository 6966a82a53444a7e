package chaos

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/terrace-storage/terrace/internal/chaos/history"
	"github.com/terrace-storage/terrace/internal/chaos/nemesis"
)

// Availability is how the load fared while a kind of fault was in force
// ("none": no fault; "recovery": the 10 s after a kill or partition
// healed).
type Availability struct {
	Fault string  `json:"fault"`
	Ops   int     `json:"ops"`
	OK    float64 `json:"ok_fraction"`
	// OKElsewhere is the fraction that succeeded among the operations
	// sent to nodes the faults in force did not target: what a client
	// that fails over to another node would see.
	OKElsewhere float64 `json:"ok_elsewhere_fraction"`
	P50         float64 `json:"p50_ms"` // latency of successful operations
	P99         float64 `json:"p99_ms"`
	Max         float64 `json:"max_ms"`
}

// recoveryWindow is how long after a disruptive fault is healed its
// aftermath is measured.
const recoveryWindow = 10 * time.Second

// availability attributes every load operation to the faults in force
// when it was invoked.
func availability(ops []history.Op, evs []Executed) []Availability {
	type acc struct {
		n, ok         int
		nElse, okElse int
		lat           []float64
	}
	by := map[string]*acc{}
	add := func(k string, op history.Op, targeted bool) {
		a, ok := by[k]
		if !ok {
			a = &acc{}
			by[k] = a
		}
		a.n++
		if !targeted {
			a.nElse++
		}
		if op.Outcome == history.OK {
			a.ok++
			if !targeted {
				a.okElse++
			}
			a.lat = append(a.lat, float64(op.Return-op.Call)/1e6)
		}
	}
	for _, op := range ops {
		if op.Final {
			continue
		}
		t := float64(op.Call) / 1e9
		kinds := map[string]bool{}
		targeted := false
		for _, e := range evs {
			if e.Skipped != "" {
				continue
			}
			end := e.Ready
			if end == 0 {
				end = e.Healed
			}
			if end == 0 {
				end = e.Start
			}
			if t >= e.Start && t <= end {
				kinds[string(e.Event.Kind)] = true
				for _, n := range e.Affected {
					targeted = targeted || n == op.Node
				}
			}
			disruptive := e.Event.Kind == nemesis.Kill || e.Event.Kind == nemesis.Partition || e.Event.Kind == nemesis.Isolate
			if disruptive && t > end && t <= end+recoveryWindow.Seconds() {
				kinds["recovery"] = true
			}
		}
		if len(kinds) == 0 {
			kinds["none"] = true
		}
		for k := range kinds {
			add(k, op, targeted)
		}
	}
	var out []Availability
	for k, a := range by {
		sort.Float64s(a.lat)
		q := func(p float64) float64 {
			if len(a.lat) == 0 {
				return 0
			}
			return a.lat[min(len(a.lat)-1, int(p*float64(len(a.lat))))]
		}
		av := Availability{Fault: k, Ops: a.n, OK: float64(a.ok) / float64(max(a.n, 1)),
			OKElsewhere: float64(a.okElse) / float64(max(a.nElse, 1)), P50: q(0.5), P99: q(0.99)}
		if len(a.lat) > 0 {
			av.Max = a.lat[len(a.lat)-1]
		}
		out = append(out, av)
	}
	sort.Slice(out, func(i, j int) bool {
		rank := func(s string) string {
			switch s {
			case "none":
				return "0"
			case "recovery":
				return "2"
			}
			return "1" + s
		}
		return rank(out[i].Fault) < rank(out[j].Fault)
	})
	return out
}

// PrintSummary writes the human summary; its last line is Line().
func PrintSummary(w io.Writer, r *Result) {
	fmt.Fprintf(w, "\nterrace chaos: seed %d; %s\n", r.Seed, r.Options)
	var kinds []string
	for _, k := range nemesis.Kinds {
		if n := r.Counts[string(k)]; n > 0 {
			s := fmt.Sprintf("%s=%d", k, n)
			if k == nemesis.Kill {
				s += fmt.Sprintf(" (etcd leader %d, Curator master %d)", r.Counts["kill "+nemesis.RoleEtcdLeader], r.Counts["kill "+nemesis.RoleCuratorMaster])
			}
			kinds = append(kinds, s)
		}
	}
	skipped := len(r.Executed) - r.Injected()
	fmt.Fprintf(w, "events:      %d injected of %d planned (%d skipped): %s\n", r.Injected(), len(r.Schedule), skipped, strings.Join(kinds, " "))
	var opk []string
	for _, k := range []history.Kind{history.Put, history.Multipart, history.Get, history.Delete, history.List} {
		c := r.ByKind[string(k)]
		opk = append(opk, fmt.Sprintf("%s %d/%d/%d", k, c[0], c[1], c[2]))
	}
	fmt.Fprintf(w, "operations:  %d (ok/failed/unknown: %s)\n", r.Ops, strings.Join(opk, ", "))
	fmt.Fprintf(w, "degraded:    fault         ops     ok  ok elsewhere    p50      p99      max\n")
	for _, a := range r.Degraded {
		fmt.Fprintf(w, "             %-12s %6d %5.1f%%  %10.1f%% %6.0fms %7.0fms %7.0fms\n", a.Fault, a.Ops, 100*a.OK, 100*a.OKElsewhere, a.P50, a.P99, a.Max)
	}
	fmt.Fprintf(w, "             (ok elsewhere: operations sent to nodes the faults did not target)\n")
	fmt.Fprintf(w, "recovery:    %d objects back at their vector %.0fs after the load stopped (%d Curator jobs); %d bit flips injected\n",
		r.Objects, r.Settle.Seconds(), r.SettleJob, len(r.Rots))
	rep := r.Report
	fmt.Fprintf(w, "history:     %d keys, %d linearizable, %d undecided; %d lost, %d corrupt, %d resurrected, %d anomalies\n",
		rep.Keys, rep.LinearizableKeys, len(rep.Undecided), rep.Lost.Count, rep.Corrupt.Count, rep.Resurrected.Count, rep.Anomalies.Count)
	for _, fs := range []struct {
		name string
		list []string
	}{{"lost", findings(rep.Lost.List)}, {"corrupt", findings(rep.Corrupt.List)}, {"resurrected", findings(rep.Resurrected.List)}, {"anomaly", findings(rep.Anomalies.List)}, {"undecided", rep.Undecided}} {
		for i, f := range fs.list {
			if i == 10 {
				fmt.Fprintf(w, "  %s: ... (%d more in summary.json)\n", fs.name, len(fs.list)-10)
				break
			}
			fmt.Fprintf(w, "  %s: %s\n", fs.name, f)
		}
	}
	fmt.Fprintf(w, "cluster:     %d findings\n", len(r.Findings))
	for i, f := range r.Findings {
		if i == 20 {
			fmt.Fprintf(w, "  ... (%d more in summary.json)\n", len(r.Findings)-20)
			break
		}
		fmt.Fprintf(w, "  %s: %s\n", f.Kind, f.Detail)
	}
	var files []string
	for _, k := range sortedKeys(r.Files) {
		files = append(files, k+"="+r.Files[k])
	}
	fmt.Fprintf(w, "files:       %s\n", strings.Join(files, " "))
	fmt.Fprintf(w, "replay:      terrace chaos --seed %d (same options); terrace chaos check %s\n", r.Seed, r.Files["history"])
	fmt.Fprintf(w, "took:        %s\n", r.Took.Round(time.Second))
	fmt.Fprintln(w, r.Line())
}

func findings[T fmt.Stringer](fs []T) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.String()
	}
	return out
}
