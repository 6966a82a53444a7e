package decide

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/terrace-storage/terrace/internal/model"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// parseEgroup reads one egroup line of a transform scenario:
//
//	eg id=1 size=1000000 live=400000 extents=3 tail=800000 vector=hdd=2 tiers=hdd,hdd
//	   [codec=zstd logical=N] [nc] [open] [young] [mtime=-48h] [atime=-1m reads=5]
//	   [policy=zstd] [policy-ec=4+2] [ec=4+2] [cold-after=1h] [bad=0] [down=1] [notail]
//
// Times are relative to t0 (the scenario's now). Replica i is on device
// d<id>-<i>; "down" marks a replica whose device is not usable.
func parseEgroup(line string) (Egroup, map[model.DeviceID]bool, error) {
	eg := Egroup{Mtime: t0.Add(-30 * 24 * time.Hour), TailKnown: true}
	down := map[model.DeviceID]bool{}
	var tiers []string
	badIdx, downIdx := -1, -1
	for _, f := range strings.Fields(line)[1:] {
		k, v, _ := strings.Cut(f, "=")
		num := func() int64 {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
		dur := func() time.Duration {
			d, _ := time.ParseDuration(v)
			return d
		}
		switch k {
		case "id":
			eg.ID = uint64(num())
			eg.ModRev = int64(eg.ID) * 10
		case "size":
			eg.Size = num()
		case "live":
			eg.LiveBytes = num()
		case "extents":
			eg.LiveExtents = int(num())
		case "tail":
			eg.TailEnd = num()
		case "notail":
			eg.TailKnown = false
		case "vector":
			vec, err := model.ParseVector(v)
			if err != nil {
				return eg, nil, err
			}
			eg.Vector = vec
		case "tiers":
			tiers = strings.Split(v, ",")
		case "codec":
			eg.Codec = v
		case "logical":
			eg.Logical = num()
		case "nc":
			eg.Incompressible = true
		case "open":
			eg.Open = true
		case "mtime":
			eg.Mtime = t0.Add(dur())
		case "atime":
			eg.Atime = t0.Add(dur())
		case "reads":
			eg.Reads = num()
		case "policy":
			eg.Policy.Compress = v
		case "ec", "policy-ec":
			var sh ECShape
			if _, err := fmt.Sscanf(v, "%d+%d", &sh.K, &sh.M); err != nil {
				return eg, nil, fmt.Errorf("%s=%q: %v", k, v, err)
			}
			if k == "ec" {
				eg.EC = sh
			} else {
				eg.Policy.EC = sh
			}
		case "cold-after":
			eg.Policy.ColdAfter = dur()
		case "bad":
			badIdx = int(num())
		case "down":
			downIdx = int(num())
		default:
			return eg, nil, fmt.Errorf("unknown egroup field %q", k)
		}
	}
	for i, t := range tiers {
		r := Replica{Replica: model.Replica{Device: model.DeviceID(fmt.Sprintf("d%d-%d", eg.ID, i)), Tier: model.Tier(t)}}
		r.Bad = i == badIdx
		if i == downIdx {
			down[r.Device] = true
		}
		eg.Replicas = append(eg.Replicas, r)
	}
	return eg, down, nil
}

func printTasks(ts []Task) string {
	var b strings.Builder
	for _, t := range ts {
		fmt.Fprintf(&b, "%s egroup=%d rev=%d bytes=%d", t.Kind, t.Egroup, t.ModRev, t.Bytes)
		if len(t.Pack) > 0 {
			var ids []string
			for _, p := range t.Pack {
				ids = append(ids, strconv.FormatUint(p.ID, 10))
			}
			fmt.Fprintf(&b, " pack=%s", strings.Join(ids, ","))
		}
		fmt.Fprintf(&b, " (%s)\n", t.Reason)
	}
	if b.Len() == 0 {
		return "no tasks\n"
	}
	return b.String()
}

// TestTransformsDataDriven runs testdata/transform*. Commands:
//
//	options key=val...   truncate-min, cold-after, max-ratio, pack, hot-reads, hot-window, grace
//	egroups              body: one "eg ..." line per egroup (parseEgroup)
//	busy id=N            an earlier task of the job already touches egroup N
//	transforms           the decision now (t0)
//
// Rewrite with: go test ./internal/curator/decide -run TransformsDataDriven -rewrite
func TestTransformsDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		if !strings.Contains(path, "transform") {
			t.Skip()
		}
		var o Options
		var egs []Egroup
		var planned []Task
		down := map[model.DeviceID]bool{}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "options":
				o = Options{GarbageGrace: time.Minute}
				for _, a := range d.CmdArgs {
					v := a.Vals[0]
					n, _ := strconv.ParseInt(v, 10, 64)
					dur, _ := time.ParseDuration(v)
					switch a.Key {
					case "truncate-min":
						o.Transform.TruncateMinBytes = n
					case "cold-after":
						o.Transform.ColdAfter = dur
					case "pack":
						o.Transform.PackBytes = n
					case "hot-reads":
						o.Transform.HotReads = n
					case "hot-window":
						o.Transform.HotWindow = dur
					case "grace":
						o.GarbageGrace = dur
					default:
						d.Fatalf(t, "unknown option %s", a.Key)
					}
				}
				o.EnsureDefaults()
				tr := o.Transform
				return fmt.Sprintf("truncate-min=%d cold-after=%s max-ratio=%.2f pack=%d hot=%d/%s grace=%s\n",
					tr.TruncateMinBytes, tr.ColdAfter, tr.MaxRatio, tr.PackBytes, tr.HotReads, tr.HotWindow, o.GarbageGrace)
			case "egroups":
				egs, planned, down = nil, nil, map[model.DeviceID]bool{}
				for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
					eg, dn, err := parseEgroup(line)
					if err != nil {
						d.Fatalf(t, "%v", err)
					}
					egs = append(egs, eg)
					for k := range dn {
						down[k] = true
					}
				}
				return fmt.Sprintf("%d egroups\n", len(egs))
			case "busy":
				var id uint64
				d.ScanArgs(t, "id", &id)
				planned = append(planned, Task{Kind: KindRecover, Egroup: id})
				return "ok\n"
			case "transforms":
				return printTasks(Transforms(t0, egs, planned, o, func(r Replica) bool { return !down[r.Device] }))
			}
			d.Fatalf(t, "unknown command %s", d.Cmd)
			return ""
		})
	})
}

// TestTransformsProperties checks invariants of the decision over random
// scans: no task for an egroup that is open, young, unhealthy, busy or
// without live data; at most one task per egroup; truncations cut only
// unreferenced tails; packs share vector, tiers and codec and stay within
// PackBytes (a single egroup may exceed it); nothing already compressed
// or known incompressible is compressed; and the decision does not depend
// on the order the scan returned egroups in.
func TestTransformsProperties(t *testing.T) {
	kinds := map[Kind]int{}
	defer func() {
		// The generator must exercise every kind, or the checks prove little.
		for _, k := range []Kind{KindTruncate, KindCompress, KindDecompress, KindECEncode, KindECDecode} {
			if kinds[k] == 0 {
				t.Errorf("no %s task in any iteration", k)
			}
		}
		t.Logf("tasks by kind: %v", kinds)
	}()
	for iter := 0; iter < 300; iter++ {
		seed := uint64(time.Now().UnixNano()) + uint64(iter)
		r := rand.New(rand.NewPCG(seed, 1))
		o := Options{GarbageGrace: time.Minute}
		o.Transform.PackBytes = 1 << (18 + r.IntN(6))
		o.Transform.ColdAfter = time.Duration(1+r.IntN(48)) * time.Hour
		o.EnsureDefaults()
		var egs []Egroup
		down := map[model.DeviceID]bool{}
		busy := map[uint64]bool{}
		var planned []Task
		n := 1 + r.IntN(40)
		for i := 0; i < n; i++ {
			size := int64(1 + r.IntN(16<<20))
			tail := size - int64(r.IntN(int(size)))
			if r.IntN(3) == 0 {
				tail = size
			}
			eg := Egroup{ID: uint64(i + 1), ModRev: int64(100 + i), Size: size, TailEnd: tail, TailKnown: r.IntN(10) > 0,
				LiveBytes: tail / int64(1+r.IntN(3)), LiveExtents: r.IntN(4), Open: r.IntN(10) == 0,
				Mtime:  t0.Add(-time.Duration(r.IntN(96*60)) * time.Minute),
				Vector: model.MustParseVector([]string{"hdd=2", "any=3", "ssd=1,hdd=1"}[r.IntN(3)])}
			if r.IntN(2) == 0 {
				eg.Atime, eg.Reads = t0.Add(-time.Duration(r.IntN(120))*time.Minute), int64(r.IntN(6))
			}
			if r.IntN(3) == 0 {
				eg.Codec = "zstd"
			}
			eg.Incompressible = r.IntN(5) == 0
			if r.IntN(4) > 0 {
				eg.Policy.Compress = "zstd"
			}
			if r.IntN(4) == 0 {
				eg.Policy.EC = ECShape{4, 2}
			}
			nrep := eg.Vector.Total()
			if r.IntN(5) == 0 {
				eg.EC, nrep = ECShape{4, 2}, 6
			}
			for j := 0; j < nrep; j++ {
				rep := Replica{Replica: model.Replica{Device: model.DeviceID(fmt.Sprintf("d%d", r.IntN(6))), Tier: []model.Tier{"ssd", "hdd"}[r.IntN(2)]}}
				rep.Bad = r.IntN(30) == 0
				eg.Replicas = append(eg.Replicas, rep)
			}
			if r.IntN(10) == 0 {
				busy[eg.ID] = true
				planned = append(planned, Task{Kind: KindCompact, Egroup: eg.ID})
			}
			egs = append(egs, eg)
		}
		down[model.DeviceID(fmt.Sprintf("d%d", r.IntN(12)))] = true
		up := func(rp Replica) bool { return !down[rp.Device] }
		tasks := Transforms(t0, egs, planned, o, up)
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d: "+format+"\ntasks:\n%s", append([]any{seed}, append(args, printTasks(tasks))...)...)
		}
		byID := map[uint64]Egroup{}
		for _, eg := range egs {
			byID[eg.ID] = eg
		}
		seen := map[uint64]bool{}
		for _, tk := range tasks {
			kinds[tk.Kind]++
			ids := []uint64{tk.Egroup}
			if ec := byID[tk.Egroup].EC.K > 0; ec != (tk.Kind == KindECDecode) {
				fail("%s task for egroup %d with ec %v", tk.Kind, tk.Egroup, byID[tk.Egroup].EC)
			}
			if tk.Kind == KindCompress || tk.Kind == KindECEncode {
				ids = nil
				var key string
				var sum int64
				for i, p := range tk.Pack {
					ids = append(ids, p.ID)
					eg := byID[p.ID]
					if p.ModRev != eg.ModRev {
						fail("pack member %d at rev %d, scan saw %d", p.ID, p.ModRev, eg.ModRev)
					}
					if i == 0 {
						key = packKey(eg)
					} else if packKey(eg) != key {
						fail("pack mixes %q and %q", key, packKey(eg))
					}
					if tk.Kind == KindCompress && (eg.Codec != "" || eg.Incompressible || eg.Policy.Compress == "" || eg.Policy.EC.K > 0) {
						fail("compressing egroup %d: codec %q incompressible %v policy %v", eg.ID, eg.Codec, eg.Incompressible, eg.Policy)
					}
					if tk.Kind == KindECEncode && (eg.EC.K > 0 || eg.Policy.EC.K == 0) {
						fail("encoding egroup %d: ec %v policy %v", eg.ID, eg.EC, eg.Policy)
					}
					if t0.Sub(lastTouch(eg)) < o.Transform.ColdAfter || windowReadsIn(t0, o.Transform.HotWindow, eg) >= o.Transform.HotReads {
						fail("compressing egroup %d touched %s ago", eg.ID, t0.Sub(lastTouch(eg)))
					}
					sum += eg.LiveBytes
				}
				if len(tk.Pack) > 1 && sum > o.Transform.PackBytes {
					fail("pack of %d bytes over %d", sum, o.Transform.PackBytes)
				}
				if sum != tk.Bytes || tk.Pack[0].ID != tk.Egroup {
					fail("pack bytes %d vs %d, first %d vs %d", sum, tk.Bytes, tk.Pack[0].ID, tk.Egroup)
				}
			}
			for _, id := range ids {
				eg := byID[id]
				if seen[id] {
					fail("egroup %d in two tasks", id)
				}
				seen[id] = true
				if busy[id] || eg.Open || !eg.TailKnown || eg.LiveExtents == 0 || t0.Sub(eg.Mtime) < o.GarbageGrace || !healthy(eg, up) {
					fail("task for ineligible egroup %+v", eg)
				}
			}
			if tk.Kind == KindTruncate {
				eg := byID[tk.Egroup]
				if tk.Bytes != eg.TailEnd || tk.Bytes >= eg.Size || eg.Size-tk.Bytes < o.Transform.TruncateMinBytes {
					fail("truncate of egroup %d (size %d tail %d) to %d", eg.ID, eg.Size, eg.TailEnd, tk.Bytes)
				}
			}
			if tk.Kind == KindDecompress && byID[tk.Egroup].Codec == "" {
				fail("decompressing plain egroup %d", tk.Egroup)
			}
		}
		shuffled := append([]Egroup(nil), egs...)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		again := Transforms(t0, shuffled, planned, o, up)
		norm := func(ts []Task) []string {
			var s []string
			for _, tk := range ts {
				s = append(s, tk.String())
			}
			sort.Strings(s)
			return s
		}
		if !reflect.DeepEqual(norm(tasks), norm(again)) {
			fail("decision depends on scan order:\n%v\nvs\n%v", norm(tasks), norm(again))
		}
	}
}
