package decide

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
)

// Egroup is one extent group as a scan sees it after the join.
//
// A scan holds one per egroup (millions), so the field order packs the
// booleans together (TestEgroupSize): a bool among the int64s costs 8 bytes.
type Egroup struct {
	ID     uint64
	ModRev int64 // metadata version the decision is computed from
	Open   bool
	// Incompressible and TailKnown are documented with Codec and TailEnd.
	Incompressible bool
	TailKnown      bool
	Writer         model.NodeID
	Size           int64 // committed bytes per replica
	Vector         model.Vector
	Mtime          time.Time
	Replicas       []Replica
	// LiveBytes and LiveExtents count referenced extents (payload bytes).
	LiveBytes   int64
	LiveExtents int
	// DeadExtents counts extents in the egroup that no object references.
	DeadExtents int
	Atime       time.Time
	// Reads counts reads in the access window ending at Atime.
	Reads int64
	// Transformations (full scans; transform.go). Codec is the codec of
	// the egroup's compressed extents ("" plain), Logical their payload
	// before compression, Incompressible that compressing it did not pay.
	Codec   string
	Logical int64
	// TailEnd is where the egroup's last extent record (live or dead)
	// ends; bytes past it are referenced by nothing. TailKnown is false
	// on partial scans, which do not read the extent map.
	TailEnd int64
	// Policy is what the buckets holding the egroup's data allow.
	Policy TransformPolicy
	// EC is set for an erasure-coded egroup: Replicas are its K+M strips
	// in order, and FileBytes is each strip file's length (for replicated
	// egroups FileBytes is Size).
	EC        ECShape
	FileBytes int64
}

// ECShape is an erasure code: K data and M parity strips.
type ECShape struct{ K, M int }

func (s ECShape) String() string { return fmt.Sprintf("%d+%d", s.K, s.M) }

// fileBytes is the length of each replica (or strip) file.
func (eg Egroup) fileBytes() int64 {
	if eg.FileBytes > 0 {
		return eg.FileBytes
	}
	return eg.Size
}

// wanted is how many good replicas (or strips) the egroup should have.
func (eg Egroup) wanted() int {
	if eg.EC.K > 0 {
		return eg.EC.K + eg.EC.M
	}
	return eg.Vector.Total()
}

// Replica is a replica with its bad mark.
type Replica struct {
	model.Replica
	Bad bool
}

// Options are the Curator's thresholds.
type Options struct {
	// GarbageGrace protects young unreferenced data: an extent or egroup
	// must be older than this before data removal touches it, so writes
	// whose object record is not yet committed are never collected.
	GarbageGrace time.Duration
	// GCDeadRatio triggers compaction of a sealed egroup whose dead
	// fraction exceeds it. Cost-benefit: moving live bytes L frees dead
	// bytes D; at 0.5 every byte copied frees at least one byte.
	GCDeadRatio float64
	// PackBelowBytes packs sealed egroups smaller than this (many small
	// egroups cost metadata and file handles).
	PackBelowBytes int64
	// GarbageTarget bounds garbage after a full scan's space tasks, as a
	// fraction of used space (live + garbage). Cost-benefit migration
	// alone leaves every egroup up to GCDeadRatio dead, so after a mass
	// delete garbage can stay near a third of used space; above the
	// target, the most-dead remaining egroups are packed too (Curator
	// §3.2.3 "pack extents") until garbage is at half the target, so the
	// next scans do not pack one egroup each while hovering at it.
	// Default 0.05; negative disables.
	GarbageTarget float64
	// NodeDownAfter is how long a node must be down before its replicas
	// are treated as lost and re-replicated (Mirador's stabilisation
	// interval; a rebooting node should not trigger a full re-copy).
	NodeDownAfter time.Duration
	// MaxTasks bounds the tasks one job emits; the rest wait for the next
	// scan. Bounding keeps a job's memory and its effect on clients small.
	MaxTasks int
	// Transform holds the thresholds of truncation and compression.
	Transform TransformOptions
}

// EnsureDefaults fills zero fields.
func (o *Options) EnsureDefaults() {
	if o.GarbageGrace == 0 {
		o.GarbageGrace = 10 * time.Minute
	}
	if o.GCDeadRatio == 0 {
		o.GCDeadRatio = 0.5
	}
	if o.PackBelowBytes == 0 {
		o.PackBelowBytes = 1 << 20
	}
	if o.GarbageTarget == 0 {
		o.GarbageTarget = 0.05
	}
	if o.NodeDownAfter == 0 {
		o.NodeDownAfter = 15 * time.Minute
	}
	if o.MaxTasks == 0 {
		o.MaxTasks = 10_000
	}
	o.Transform.EnsureDefaults()
}

// Kind names a task kind.
type Kind string

// Task kinds, in priority order (recovery first).
const (
	KindSeal           Kind = "seal"            // seal an open egroup whose writer is gone
	KindRecover        Kind = "recover"         // add/drop replicas to meet the vector (DF/FT)
	KindRemoveExtents  Kind = "remove-extents"  // DR stage 1: unreferenced extent records
	KindRemoveEgroup   Kind = "remove-egroup"   // DR stage 2: egroups with no live extents
	KindCompact        Kind = "compact"         // GC: migrate live extents out of mostly-dead egroups
	KindScrub          Kind = "scrub"           // verify every replica's checksums
	KindRemoveReplicas Kind = "remove-replicas" // drop surplus replicas
)

// Priority orders kinds: lower runs first.
func (k Kind) Priority() int {
	switch k {
	case KindSeal:
		return 0
	case KindRecover, KindRebuild:
		return 1
	case KindRemoveReplicas:
		return 2
	case KindRemoveExtents, KindRemoveEgroup:
		return 3
	case KindTierUp:
		return 4
	case KindTierDown, KindBalance:
		return 5
	case KindCompact, KindTruncate, KindDecompress, KindECDecode:
		return 6
	case KindScrub:
		return 7
	case KindCompress, KindECEncode, KindDedup:
		return 8
	}
	return 9
}

// Task is one unit of background work. It carries the metadata version it
// was computed from; the executor applies it with compare-and-swap and
// drops it if the version moved (docs/design/0000 invariant 3).
type Task struct {
	Kind   Kind
	Egroup uint64
	ModRev int64
	// Add and Remove are replica changes (recover, remove-replicas).
	Add    []model.Replica
	Remove []model.Replica
	// Extents are extent IDs (remove-extents) with their ModRevs.
	Extents    []uint64
	ExtentRevs []int64
	// Pack lists the source egroups of a compression (the first is
	// Egroup); each is rewritten only if still at its revision.
	Pack []EgroupRev
	// Codec and EC are the form a transform writes: the codec extents are
	// compressed with ("" plain) and the erasure code (zero: replicas).
	Codec string
	EC    ECShape
	// Canon and CanonRev are a dedup's canonical extent (Extents and
	// ExtentRevs its duplicates).
	Canon    uint64
	CanonRev int64
	Bytes    int64
	Reason   string
}

func (t Task) String() string {
	s := fmt.Sprintf("%s egroup=%016x rev=%d", t.Kind, t.Egroup, t.ModRev)
	if len(t.Add) > 0 {
		s += fmt.Sprintf(" add=%v", devices(t.Add))
	}
	if len(t.Remove) > 0 {
		s += fmt.Sprintf(" remove=%v", devices(t.Remove))
	}
	if len(t.Extents) > 0 {
		s += fmt.Sprintf(" extents=%d", len(t.Extents))
	}
	if len(t.Pack) > 1 {
		s += fmt.Sprintf(" pack=%d", len(t.Pack))
	}
	if t.Reason != "" {
		s += " (" + t.Reason + ")"
	}
	return s
}

func devices(rs []model.Replica) []model.DeviceID {
	out := make([]model.DeviceID, len(rs))
	for i, r := range rs {
		out[i] = r.Device
	}
	return out
}

// Health marks devices of nodes down longer than NodeDownAfter as failed,
// so recovery treats their replicas as lost; shorter outages keep them
// parked (placement.Reconcile neither counts nor drops them).
func Health(s *model.Snapshot, downSince map[model.NodeID]time.Time, o Options) *model.Snapshot {
	devs := append([]model.Device(nil), s.Devices...)
	changed := false
	for i, d := range devs {
		if since, ok := downSince[d.Node]; ok && !s.NodeUp(d.Node) && s.Now.Sub(since) >= o.NodeDownAfter {
			devs[i].State = model.DeviceFailed
			changed = true
		}
	}
	if !changed {
		return s
	}
	return model.NewSnapshot(s.Now, s.Nodes, devs).WithSelf(s.Self)
}

// Stats summarises what a scan saw.
type Stats struct {
	Egroups              int
	UnderReplicated      int
	UnderReplicatedBytes int64
	GarbageBytes         int64 // dead payload bytes in egroups
	LiveBytes            int64
	BadReplicas          int
}

// Recovery decides replica additions and removals for one egroup: bad
// replicas and replicas on failed or draining devices are replaced; a
// missing vector count is filled; surplus replicas are dropped. Open
// egroups whose writer node is down are sealed first.
func Recovery(s *model.Snapshot, eg Egroup, pol placement.Policy, rng *rand.Rand) ([]Task, error) {
	if eg.EC.K > 0 {
		return RecoverStripe(s, eg, pol, rng)
	}
	if eg.Open {
		if eg.Writer != "" && !s.NodeUp(eg.Writer) {
			return []Task{{Kind: KindSeal, Egroup: eg.ID, ModRev: eg.ModRev, Reason: "writer " + string(eg.Writer) + " down"}}, nil
		}
		return nil, nil // its writer owns it
	}
	// Nearly every egroup of a scan is healthy: answer those without the
	// allocations of a reconciliation (placement.Satisfied allocates
	// nothing, and current lives on the stack for the usual few replicas).
	var buf [8]model.Replica
	current := buf[:0]
	var bad []model.Replica
	var parked []model.NodeID // down, not yet for NodeDownAfter
	lost := false             // a replica on a failed, draining or unknown device
	for _, r := range eg.Replicas {
		if r.Bad {
			bad = append(bad, r.Replica)
			continue
		}
		d, ok := s.Device(r.Device)
		switch {
		case !ok || d.State == model.DeviceFailed || d.State == model.DeviceDraining:
			lost = true
		case !s.NodeUp(d.Node):
			parked = append(parked, d.Node)
		}
		current = append(current, r.Replica)
	}
	if len(parked) > 0 {
		// A replica on a node that is down, but not yet for NodeDownAfter
		// (Health has not marked its devices failed), is waited for: a
		// rebooting node must not trigger a full re-copy (Mirador's
		// stabilisation interval). It still counts, so the bad and lost
		// replicas are replaced now rather than after the wait (which a
		// flapping node would restart forever), and nothing goes on its
		// node while it is down.
		if len(bad) == 0 && !lost {
			return nil, nil
		}
		s = withNodesUp(s, parked)
	}
	if len(bad) == 0 && placement.Satisfied(s, current, eg.Vector) {
		return nil, nil
	}
	if len(current) == 0 && len(bad) > 0 {
		// Every replica is marked bad, and a move copies only from a
		// good one. Each may still hold good copies of most slices (a
		// read marks a whole replica bad for one slice, and reads fall
		// back across replicas extent by extent): relocate the live
		// extents, each read from whichever replica verifies, into a
		// fresh egroup; data removal then reclaims this one.
		return []Task{{Kind: KindCompact, Egroup: eg.ID, ModRev: eg.ModRev, Bytes: eg.LiveBytes,
			Reason: fmt.Sprintf("all %d replicas bad: relocate the live extents, read from whichever replica verifies", len(bad))}}, nil
	}
	req := placement.Request{Vector: eg.Vector, Bytes: eg.Size}
	for _, d := range s.Devices {
		if slices.Contains(parked, d.Node) {
			req.Exclude = append(req.Exclude, d.ID)
		}
	}
	// Not onto a bad replica's device while another will do: the copy
	// would overwrite the bad file, which may hold the only good copy of
	// some slices, before the new one is verified.
	base := len(req.Exclude)
	for _, b := range bad {
		req.Exclude = append(req.Exclude, b.Device)
	}
	add, remove, err := placement.ReconcileRequest(s, current, req, pol, rng)
	if err != nil && len(bad) > 0 {
		req.Exclude = req.Exclude[:base]
		add, remove, err = placement.ReconcileRequest(s, current, req, pol, rng)
	}
	if err != nil {
		return nil, fmt.Errorf("egroup %016x: %w", eg.ID, err)
	}
	remove = append(remove, bad...)
	if len(add) == 0 && len(remove) == 0 {
		return nil, nil
	}
	kind := KindRecover
	reason := fmt.Sprintf("%d live of %d wanted", len(current)-countIn(remove, current), eg.Vector.Total())
	if len(add) == 0 {
		kind = KindRemoveReplicas
		reason = "surplus or lost replicas"
	}
	if len(bad) > 0 {
		reason += fmt.Sprintf(", %d bad", len(bad))
	}
	return []Task{{Kind: kind, Egroup: eg.ID, ModRev: eg.ModRev, Add: add, Remove: remove, Bytes: eg.Size * int64(len(add)), Reason: reason}}, nil
}

// withNodesUp returns s with the given nodes counted as up (their
// replicas then count toward the vector; the caller keeps new replicas
// off their devices).
func withNodesUp(s *model.Snapshot, up []model.NodeID) *model.Snapshot {
	nodes := append([]model.Node(nil), s.Nodes...)
	for i := range nodes {
		if slices.Contains(up, nodes[i].ID) {
			nodes[i].Up = true
		}
	}
	return model.NewSnapshot(s.Now, nodes, s.Devices)
}

func countIn(xs, in []model.Replica) int {
	n := 0
	for _, x := range xs {
		for _, y := range in {
			if x.Device == y.Device {
				n++
				break
			}
		}
	}
	return n
}

// Space decides data removal and garbage collection for one egroup.
func Space(now time.Time, eg Egroup, o Options) []Task {
	if eg.Open || now.Sub(eg.Mtime) < o.GarbageGrace {
		return nil
	}
	if eg.LiveExtents == 0 {
		return []Task{{Kind: KindRemoveEgroup, Egroup: eg.ID, ModRev: eg.ModRev, Bytes: eg.Size, Reason: "no live extents"}}
	}
	dead := eg.Size - eg.LiveBytes
	if eg.Size > 0 && float64(dead)/float64(eg.Size) > o.GCDeadRatio {
		return []Task{{Kind: KindCompact, Egroup: eg.ID, ModRev: eg.ModRev, Bytes: eg.LiveBytes,
			Reason: fmt.Sprintf("%.0f%% dead", 100*float64(dead)/float64(eg.Size))}}
	}
	if eg.Size < o.PackBelowBytes && eg.DeadExtents > 0 {
		return []Task{{Kind: KindCompact, Egroup: eg.ID, ModRev: eg.ModRev, Bytes: eg.LiveBytes, Reason: "small egroup with dead extents"}}
	}
	return nil
}

// Plan runs every decision over a scan's egroups and returns tasks in
// priority order, bounded by MaxTasks, plus the scan's statistics.
func Plan(s *model.Snapshot, egs []Egroup, pol placement.Policy, o Options, rng *rand.Rand, space bool) ([]Task, Stats, []error) {
	var tasks []Task
	var st Stats
	var errs []error
	up := func(r Replica) bool {
		d, ok := s.Device(r.Device)
		return ok && d.State == model.DeviceUp && s.NodeUp(d.Node)
	}
	for _, eg := range egs {
		st.Egroups++
		st.LiveBytes += eg.LiveBytes
		if g := eg.Size - eg.LiveBytes; g > 0 {
			st.GarbageBytes += g
		}
		good := 0
		for _, r := range eg.Replicas {
			if r.Bad {
				st.BadReplicas++
				continue
			}
			if d, ok := s.Device(r.Device); ok && d.State != model.DeviceFailed && s.NodeUp(d.Node) {
				good++
			}
		}
		if good < eg.wanted() {
			st.UnderReplicated++
			st.UnderReplicatedBytes += eg.fileBytes() * int64(eg.wanted()-good)
		}
		ts, err := Recovery(s, eg, pol, rng)
		if err != nil {
			errs = append(errs, err)
		}
		tasks = append(tasks, ts...)
		if space {
			if t, ok := TruncateInstead(s.Now, eg, o, up); ok && len(ts) == 0 {
				tasks = append(tasks, t)
				continue
			}
			tasks = append(tasks, Space(s.Now, eg, o)...)
		}
	}
	if space {
		tasks = append(tasks, PackForTarget(s.Now, egs, tasks, st, o)...)
		tasks = append(tasks, Transforms(s.Now, egs, tasks, o, up)...)
	}
	sort.SliceStable(tasks, func(i, j int) bool { return tasks[i].Kind.Priority() < tasks[j].Kind.Priority() })
	if len(tasks) > o.MaxTasks {
		tasks = tasks[:o.MaxTasks]
	}
	return tasks, st, errs
}

// PackForTarget is garbage collection under space pressure. planned are
// the tasks already decided and st the scan's totals. If the garbage those
// tasks leave behind is over GarbageTarget of used space, it packs the
// live extents of the most-dead remaining egroups (sealed, past the grace
// period) into fresh egroups, most dead first — the most space freed per
// byte copied — until the projected garbage is at half the target.
func PackForTarget(now time.Time, egs []Egroup, planned []Task, st Stats, o Options) []Task {
	if o.GarbageTarget <= 0 {
		return nil
	}
	tasked := map[uint64]bool{}
	truncatedTo := map[uint64]int64{}
	for _, t := range planned {
		switch t.Kind {
		case KindRemoveEgroup, KindCompact:
			tasked[t.Egroup] = true
		case KindTruncate:
			truncatedTo[t.Egroup] = t.Bytes
		}
	}
	garbage := st.GarbageBytes
	var cands []Egroup
	for _, eg := range egs {
		dead := eg.Size - eg.LiveBytes
		if dead <= 0 {
			continue
		}
		if tasked[eg.ID] {
			garbage -= dead
			continue
		}
		if to, ok := truncatedTo[eg.ID]; ok {
			garbage -= eg.Size - to // the tail goes; the rest waits
			continue
		}
		if !eg.Open && eg.LiveExtents > 0 && now.Sub(eg.Mtime) >= o.GarbageGrace {
			cands = append(cands, eg)
		}
	}
	over := func(target float64) bool { return float64(garbage) > target*float64(st.LiveBytes+garbage) }
	if !over(o.GarbageTarget) {
		return nil
	}
	deadRatio := func(eg Egroup) float64 { return float64(eg.Size-eg.LiveBytes) / float64(eg.Size) }
	sort.Slice(cands, func(i, j int) bool {
		if ri, rj := deadRatio(cands[i]), deadRatio(cands[j]); ri != rj {
			return ri > rj
		}
		return cands[i].ID < cands[j].ID
	})
	var out []Task
	for _, eg := range cands {
		if !over(o.GarbageTarget / 2) {
			break
		}
		out = append(out, Task{Kind: KindCompact, Egroup: eg.ID, ModRev: eg.ModRev, Bytes: eg.LiveBytes,
			Reason: fmt.Sprintf("pack: %.0f%% dead while garbage is over %.0f%% of used space", 100*deadRatio(eg), 100*o.GarbageTarget)})
		garbage -= eg.Size - eg.LiveBytes
	}
	return out
}
