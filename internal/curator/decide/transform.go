package decide

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Transformation decisions (Curator §3.2.3 truncation, §3.2.4
// compression; docs/design/0010-curator-transforms.md). Like every
// decision here they are pure: the scan's joined egroups, the options and
// the time in, tasks out.

// Task kinds of the transformations.
const (
	KindTruncate   Kind = "truncate"       // cut a sealed egroup's unreferenced tail
	KindCompress   Kind = "compress"       // rewrite cold egroups' extents compressed, packed together
	KindDecompress Kind = "decompress"     // rewrite a hot (or no longer wanted) compressed egroup plain
	KindECEncode   Kind = "ec-encode"      // rewrite cold replicated egroups as K+M strips, packed
	KindECDecode   Kind = "ec-decode"      // rewrite a hot (or no longer wanted) erasure-coded egroup as replicas
	KindRebuild    Kind = "rebuild-strips" // reconstruct lost strips onto new devices
)

// TransformPolicy is what the buckets whose data an egroup holds allow
// (the Curator folds every referencing bucket's setting: compression only
// if all of them ask for it, the longest cold-after).
type TransformPolicy struct {
	Compress  string        // "" or "zstd"
	ColdAfter time.Duration // 0: Options.ColdAfter
	EC        ECShape       // zero: replicas
}

func (p TransformPolicy) String() string {
	var parts []string
	if p.Compress != "" {
		parts = append(parts, p.Compress)
	}
	if p.EC.K > 0 {
		parts = append(parts, "ec "+p.EC.String())
	}
	if len(parts) == 0 {
		return "none"
	}
	s := strings.Join(parts, ",")
	if p.ColdAfter > 0 {
		s += " cold-after=" + p.ColdAfter.String()
	}
	return s
}

// TransformOptions are the thresholds of the transformations.
type TransformOptions struct {
	// TruncateMinBytes: a dead tail shorter than this is not worth a
	// metadata commit and a truncate per replica. Default 64 KiB.
	TruncateMinBytes int64
	// ColdAfter is how long an egroup must go unread and unwritten before
	// it is compressed, when its buckets do not say. Default 24 h.
	ColdAfter time.Duration
	// MaxRatio: compressed/plain above this does not pay (the data is left
	// plain and its egroup remembered as incompressible). Default 0.9.
	MaxRatio float64
	// PackBytes is the live payload one compression task packs from
	// several source egroups into fresh ones (Curator §3.2.4). Default
	// 16 MiB, one full egroup.
	PackBytes int64
	// HotReads within HotWindow make a compressed egroup hot: it is
	// rewritten plain. Defaults 3 in 10 min (the tiering promotion
	// threshold).
	HotReads  int64
	HotWindow time.Duration
}

// EnsureDefaults fills zero fields.
func (o *TransformOptions) EnsureDefaults() {
	if o.TruncateMinBytes == 0 {
		o.TruncateMinBytes = 64 << 10
	}
	if o.ColdAfter == 0 {
		o.ColdAfter = 24 * time.Hour
	}
	if o.MaxRatio == 0 {
		o.MaxRatio = 0.9
	}
	if o.PackBytes == 0 {
		o.PackBytes = 16 << 20
	}
	if o.HotReads == 0 {
		o.HotReads = 3
	}
	if o.HotWindow == 0 {
		o.HotWindow = 10 * time.Minute
	}
}

// EgroupRev names an egroup and the record revision a decision saw.
type EgroupRev struct {
	ID     uint64
	ModRev int64
}

// healthy reports whether every replica is good and on an up device:
// transformations leave egroups that recovery must handle first alone.
func healthy(eg Egroup, up func(Replica) bool) bool {
	for _, r := range eg.Replicas {
		if r.Bad || !up(r) {
			return false
		}
	}
	return len(eg.Replicas) > 0
}

// Transforms decides truncations, compressions and decompressions for a
// full scan's egroups. Egroups that an already planned task touches
// (recovery, removal, compaction) are left for a later scan, so every
// task's compare-and-swap stays meaningful. up reports whether a replica's
// device is usable.
func Transforms(now time.Time, egs []Egroup, planned []Task, o Options, up func(Replica) bool) []Task {
	to := o.Transform
	busy := map[uint64]bool{}
	for _, t := range planned {
		busy[t.Egroup] = true
		for _, p := range t.Pack {
			busy[p.ID] = true
		}
	}
	var out []Task
	var cands, ecCands []Egroup
	for _, eg := range egs {
		if busy[eg.ID] || eg.Open || !eg.TailKnown || eg.LiveExtents == 0 || now.Sub(eg.Mtime) < o.GarbageGrace {
			continue
		}
		if !healthy(eg, up) {
			continue
		}
		hot := windowReadsIn(now, to.HotWindow, eg) >= to.HotReads
		if eg.EC.K > 0 {
			// Hot erasure-coded data returns to replicas (placed by its
			// vector, on the fast tier), plain; so does data whose buckets
			// no longer ask for this code.
			switch {
			case hot:
				out = append(out, Task{Kind: KindECDecode, Egroup: eg.ID, ModRev: eg.ModRev, Bytes: eg.LiveBytes,
					Reason: fmt.Sprintf("hot: %d reads within %s", eg.Reads, to.HotWindow)})
			case eg.Policy.EC != eg.EC:
				// Compressed data its buckets still want compressed stays so.
				out = append(out, Task{Kind: KindECDecode, Egroup: eg.ID, ModRev: eg.ModRev, Bytes: eg.LiveBytes, Codec: eg.Policy.Compress,
					Reason: fmt.Sprintf("policy %s, stored ec %s", eg.Policy, eg.EC)})
			}
			continue
		}
		if eg.Codec != "" {
			if r := windowReadsIn(now, to.HotWindow, eg); r >= to.HotReads {
				out = append(out, Task{Kind: KindDecompress, Egroup: eg.ID, ModRev: eg.ModRev, Bytes: eg.LiveBytes,
					Reason: fmt.Sprintf("hot: %d reads within %s", r, to.HotWindow)})
				continue
			}
			if eg.Policy.Compress != eg.Codec {
				out = append(out, Task{Kind: KindDecompress, Egroup: eg.ID, ModRev: eg.ModRev, Bytes: eg.LiveBytes,
					Reason: fmt.Sprintf("policy %s, stored %s", eg.Policy, eg.Codec)})
				continue
			}
		}
		if eg.Policy.EC.K > 0 && eg.Policy.EC.K+eg.Policy.EC.M <= 8 {
			cold := eg.Policy.ColdAfter
			if cold == 0 {
				cold = to.ColdAfter
			}
			if now.Sub(lastTouch(eg)) >= cold && !hot {
				ecCands = append(ecCands, eg)
			}
			continue // the encode compresses too, if asked
		}
		if dead := eg.Size - eg.TailEnd; eg.TailEnd > 0 && dead >= to.TruncateMinBytes {
			out = append(out, Task{Kind: KindTruncate, Egroup: eg.ID, ModRev: eg.ModRev, Bytes: eg.TailEnd,
				Reason: fmt.Sprintf("%d-byte unreferenced tail", dead)})
			continue
		}
		if eg.Codec == "" && !eg.Incompressible && eg.Policy.Compress != "" && len(eg.Replicas) > 0 {
			cold := eg.Policy.ColdAfter
			if cold == 0 {
				cold = to.ColdAfter
			}
			// Not one the hot rule would decompress again at once (when
			// cold-after is shorter than the hot window).
			if now.Sub(lastTouch(eg)) >= cold && windowReadsIn(now, to.HotWindow, eg) < to.HotReads {
				cands = append(cands, eg)
			}
		}
	}
	out = append(out, pack(now, cands, to, KindCompress)...)
	return append(out, pack(now, ecCands, to, KindECEncode)...)
}

// packCompress groups compression candidates that share a vector, codec
// and the tiers their replicas occupy (so the packed egroup can keep them
// where they are), coldest first, into tasks of about PackBytes live
// payload each.
func pack(now time.Time, cands []Egroup, to TransformOptions, kind Kind) []Task {
	groups := map[string][]Egroup{}
	for _, eg := range cands {
		groups[packKey(eg)] = append(groups[packKey(eg)], eg)
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []Task
	for _, k := range keys {
		g := groups[k]
		sort.Slice(g, func(i, j int) bool {
			ti, tj := lastTouch(g[i]), lastTouch(g[j])
			if !ti.Equal(tj) {
				return ti.Before(tj)
			}
			return g[i].ID < g[j].ID
		})
		var cur *Task
		for _, eg := range g {
			if cur != nil && cur.Bytes+eg.LiveBytes > to.PackBytes {
				out = append(out, *cur)
				cur = nil
			}
			if cur == nil {
				cur = &Task{Kind: kind, Egroup: eg.ID, ModRev: eg.ModRev, Codec: eg.Policy.Compress,
					Reason: fmt.Sprintf("cold %s, %s", now.Sub(lastTouch(eg)).Round(time.Second), eg.Policy)}
				if kind == KindECEncode {
					cur.EC = eg.Policy.EC
				}
			}
			cur.Pack = append(cur.Pack, EgroupRev{ID: eg.ID, ModRev: eg.ModRev})
			cur.Bytes += eg.LiveBytes
		}
		if cur != nil {
			out = append(out, *cur)
		}
	}
	for i := range out {
		if len(out[i].Pack) > 1 {
			out[i].Reason += fmt.Sprintf(", packs %d egroups", len(out[i].Pack))
		}
	}
	return out
}

func packKey(eg Egroup) string {
	tiers := make([]string, 0, len(eg.Replicas))
	for _, r := range eg.Replicas {
		tiers = append(tiers, string(r.Tier))
	}
	sort.Strings(tiers)
	return eg.Vector.String() + "|" + strings.Join(tiers, ",") + "|" + eg.Policy.Compress + "|" + eg.Policy.EC.String()
}

// TruncateInstead decides, before garbage collection's migration, whether
// an egroup's dead bytes are best reclaimed by truncation: its
// unreferenced tail is at least TruncateMinBytes and what stays dead after
// the cut is under GCDeadRatio of what stays. Truncation then frees the
// tail without copying a byte, where migration would copy every live
// extent.
func TruncateInstead(now time.Time, eg Egroup, o Options, up func(Replica) bool) (Task, bool) {
	if eg.Open || eg.EC.K > 0 || !eg.TailKnown || eg.LiveExtents == 0 || eg.TailEnd <= 0 || now.Sub(eg.Mtime) < o.GarbageGrace || !healthy(eg, up) {
		return Task{}, false
	}
	tail := eg.Size - eg.TailEnd
	if tail < o.Transform.TruncateMinBytes {
		return Task{}, false
	}
	if rest := eg.TailEnd - eg.LiveBytes; rest > 0 && float64(rest)/float64(eg.TailEnd) > o.GCDeadRatio {
		return Task{}, false // mostly dead anyway: migration frees it all
	}
	return Task{Kind: KindTruncate, Egroup: eg.ID, ModRev: eg.ModRev, Bytes: eg.TailEnd,
		Reason: fmt.Sprintf("%d-byte unreferenced tail", tail)}, true
}

// windowReadsIn is an egroup's read count if its access window is current.
func windowReadsIn(now time.Time, window time.Duration, eg Egroup) int64 {
	if eg.Atime.IsZero() || now.Sub(eg.Atime) > window {
		return 0
	}
	return eg.Reads
}
