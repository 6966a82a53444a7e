package layout

import (
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Limits. Each is a ceiling with a reason; hitting one returns an error
// naming it.
const (
	// MaxStripes bounds a log's width: a segment's replica list stays small
	// in the layout record, and a recovery seals at most this many stripes.
	MaxStripes = 256
	// MaxReplicas bounds a stripe's replica count (the vector's total).
	MaxReplicas = 8
	// MaxSegments bounds the layout's length: every recovery appends one
	// segment and trimming removes them; at ~40 bytes per replica a layout
	// of 2048 segments of 8 stripes × 2 replicas stays well under the
	// metadata store's 1 MiB value limit.
	MaxSegments = 2048
	// MaxLeasePositions and MaxLeaseHold bound what a log's lease policy
	// may grant one client: a lease's unused positions are holes until the
	// lease expires, so both bound how long readers can wait.
	MaxLeasePositions = 1 << 20
	MaxLeaseHold      = 10 * time.Second
	// MaxEntryBytes bounds one entry (well under the RPC message limit).
	MaxEntryBytes = 1 << 20
)

// Errors.
var (
	ErrInvalidName = errors.New("layout: invalid log name")
	ErrInvalid     = errors.New("layout: invalid layout")
	ErrNoSegment   = errors.New("layout: position has no segment")
	ErrTooMany     = errors.New("layout: too many segments (trim the log)")
)

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,127}$`)

// CheckName validates a log name: 1–128 of a-z, 0-9, '.', '_' and '-',
// starting with a letter or digit (names become metadata keys and CLI
// arguments).
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%w %q: use 1-128 of a-z 0-9 . _ - starting with a letter or digit", ErrInvalidName, name)
	}
	return nil
}

// Record is a log's durable description.
type Record struct {
	Name    string `json:"name"`
	ID      uint64 `json:"id"`
	Vector  string `json:"vector"`
	Stripes int    `json:"stripes"`
	// Lease policy (leased batching): the largest block one lease may hold
	// and for how long. MaxLeasePositions 0 turns leases off.
	MaxLeasePositions int           `json:"max_lease_positions,omitempty"`
	MaxLeaseHold      time.Duration `json:"max_lease_hold,omitempty"`
	Created           int64         `json:"created"` // unix ns
	// TrimBefore: every position below it is trimmed.
	TrimBefore uint64 `json:"trim_before,omitempty"`
}

// Validate checks a record.
func (r Record) Validate() error {
	if err := CheckName(r.Name); err != nil {
		return err
	}
	if r.Stripes < 1 || r.Stripes > MaxStripes {
		return fmt.Errorf("layout: %d stripes outside [1, %d]", r.Stripes, MaxStripes)
	}
	if r.MaxLeasePositions < 0 || r.MaxLeasePositions > MaxLeasePositions {
		return fmt.Errorf("layout: lease of %d positions outside [0, %d]", r.MaxLeasePositions, MaxLeasePositions)
	}
	if r.MaxLeaseHold < 0 || r.MaxLeaseHold > MaxLeaseHold {
		return fmt.Errorf("layout: lease hold %s outside [0, %s]", r.MaxLeaseHold, MaxLeaseHold)
	}
	if r.MaxLeasePositions > 1 && r.MaxLeaseHold <= 0 {
		return fmt.Errorf("layout: a lease of %d positions needs a hold time", r.MaxLeasePositions)
	}
	return nil
}

// Replica is one copy of a stripe: a device on a node.
type Replica struct {
	Node   string `json:"n"`
	Device string `json:"d"`
	// Stale marks a replica that missed its segment's settle: it is not
	// read (nor counted) until repair has copied the segment to it.
	Stale bool `json:"s,omitempty"`
}

func (r Replica) String() string {
	s := r.Device
	if r.Stale {
		s += "(stale)"
	}
	return s
}

// Segment is a range of positions striped over replica sets.
type Segment struct {
	ID    uint32 `json:"id"`
	Start uint64 `json:"start"`
	// End 0 means open: the active segment, always the last.
	End     uint64      `json:"end,omitempty"`
	Epoch   uint64      `json:"epoch"`
	Stripes [][]Replica `json:"stripes"`
}

// Open reports whether the segment is the active one.
func (s Segment) Open() bool { return s.End == 0 }

// Contains reports whether pos lies in the segment.
func (s Segment) Contains(pos uint64) bool {
	return pos >= s.Start && (s.End == 0 || pos < s.End)
}

// Layout is a log's current epoch and segments.
type Layout struct {
	Epoch    uint64    `json:"epoch"`
	Segments []Segment `json:"segments"`
	// NextSegment is the ID the next segment gets (IDs are never reused, so
	// a replica of a dropped segment can never be mistaken for a new one).
	NextSegment uint32 `json:"next_segment"`
}

// Clone returns a deep copy.
func (l Layout) Clone() Layout {
	out := Layout{Epoch: l.Epoch, NextSegment: l.NextSegment, Segments: make([]Segment, len(l.Segments))}
	for i, s := range l.Segments {
		c := s
		c.Stripes = make([][]Replica, len(s.Stripes))
		for j, st := range s.Stripes {
			c.Stripes[j] = append([]Replica(nil), st...)
		}
		out.Segments[i] = c
	}
	return out
}

// Active returns the active segment, if any.
func (l Layout) Active() (Segment, bool) {
	if n := len(l.Segments); n > 0 && l.Segments[n-1].Open() {
		return l.Segments[n-1], true
	}
	return Segment{}, false
}

// Find returns the index of the segment holding pos.
func (l Layout) Find(pos uint64) (int, error) {
	i := sort.Search(len(l.Segments), func(i int) bool { return l.Segments[i].Start > pos }) - 1
	if i < 0 || !l.Segments[i].Contains(pos) {
		return -1, fmt.Errorf("%w: position %d (layout epoch %d)", ErrNoSegment, pos, l.Epoch)
	}
	return i, nil
}

// StripeOf is the stripe holding pos in a log of width w.
func StripeOf(pos uint64, w int) int { return int(pos % uint64(w)) }

// Local is pos's index within its stripe.
func Local(pos uint64, w int) uint64 { return pos / uint64(w) }

// Position is the position of local index l of stripe s.
func Position(l uint64, s, w int) uint64 { return l*uint64(w) + uint64(s) }

// LocalRange is the range [lo, hi) of local indexes of stripe s whose
// positions lie in [start, end).
func LocalRange(start, end uint64, s, w int) (lo, hi uint64) {
	first := func(p uint64) uint64 { // smallest l with l*w+s >= p
		if p <= uint64(s) {
			return 0
		}
		return (p - uint64(s) + uint64(w) - 1) / uint64(w)
	}
	lo, hi = first(start), first(end)
	if hi < lo {
		hi = lo
	}
	return lo, hi
}

// Primary is the replica that serves reads and writes of stripe s of a
// segment: the first replica that is not stale.
func (s Segment) Primary(stripe int) (Replica, bool) {
	for _, r := range s.Stripes[stripe] {
		if !r.Stale {
			return r, true
		}
	}
	return Replica{}, false
}

// Validate checks the layout's invariants for a log of width w: segments
// sorted and contiguous, only the last open, IDs increasing and below
// NextSegment, epochs not above the layout's, each stripe with 1..MaxReplicas
// replicas on distinct devices, at least one of them fresh.
func (l Layout) Validate(w int) error {
	if len(l.Segments) > MaxSegments {
		return fmt.Errorf("%w: %d > %d", ErrTooMany, len(l.Segments), MaxSegments)
	}
	for i, s := range l.Segments {
		bad := func(f string, a ...any) error {
			return fmt.Errorf("%w: segment %d (id %d): %s", ErrInvalid, i, s.ID, fmt.Sprintf(f, a...))
		}
		if s.ID >= l.NextSegment {
			return bad("id not below next_segment %d", l.NextSegment)
		}
		if s.Epoch > l.Epoch {
			return bad("epoch %d after the layout's %d", s.Epoch, l.Epoch)
		}
		if s.Open() && i != len(l.Segments)-1 {
			return bad("open but not last")
		}
		if !s.Open() && s.End <= s.Start {
			return bad("empty range [%d, %d)", s.Start, s.End)
		}
		if i > 0 {
			p := l.Segments[i-1]
			if p.End != s.Start {
				return bad("starts at %d, previous ends at %d", s.Start, p.End)
			}
			if p.ID >= s.ID || p.Epoch >= s.Epoch {
				return bad("id/epoch not increasing")
			}
		}
		if len(s.Stripes) != w {
			return bad("%d stripes, want %d", len(s.Stripes), w)
		}
		for j, st := range s.Stripes {
			if len(st) < 1 || len(st) > MaxReplicas {
				return bad("stripe %d has %d replicas", j, len(st))
			}
			seen := map[string]bool{}
			fresh := 0
			for _, r := range st {
				if r.Node == "" || r.Device == "" {
					return bad("stripe %d has a replica without node or device", j)
				}
				if seen[r.Device] {
					return bad("stripe %d uses device %s twice", j, r.Device)
				}
				seen[r.Device] = true
				if !r.Stale {
					fresh++
				}
			}
			if fresh == 0 {
				return bad("stripe %d has no fresh replica", j)
			}
			if s.Open() && fresh != len(st) {
				return bad("active stripe %d has a stale replica", j)
			}
		}
	}
	return nil
}

// Run is a half-open range [Start, End) of local indexes.
type Run struct{ Start, End uint64 }

// Runs compresses sorted, distinct local indexes into runs.
func Runs(sorted []uint64) []Run {
	var out []Run
	for _, l := range sorted {
		if n := len(out); n > 0 && out[n-1].End == l {
			out[n-1].End++
			continue
		}
		out = append(out, Run{l, l + 1})
	}
	return out
}

// Copy moves one entry during settle: read it from replica From and write
// it to the replicas To (indexes into the stripe's replica list).
type Copy struct {
	Pos  uint64
	From int
	To   []int
	// Have are every live replica holding the entry (From is the first):
	// settle reads from the next when one's write is still in flight.
	Have []int
}

// StripeSettle is what settle does to one stripe of the sealed segment.
type StripeSettle struct {
	Stripe int
	Copies []Copy
	// Fills are positions no live replica holds: filled on every live
	// replica (as runs of local indexes).
	Fills []Run
	// MaxWritten is 1 + the highest position any live replica holds, or 0.
	MaxWritten uint64
	// Stale are replicas (indexes into the stripe's replica list) that
	// answered the seal but hold an entry where another live replica
	// holds a fill: they are marked stale in the new layout (repair
	// copies the segment into them again) instead of being settled.
	Stale []int
}

// MaxSettleCopies bounds the entries one settle copies per stripe: a live
// replica can only lack entries whose write was in flight at the seal, so
// more means a replica lost data and needs repair, not settle.
const MaxSettleCopies = 1 << 16

// SealedStripe is what sealing one stripe returned: for each replica (by
// index in the stripe), whether it answered, its written runs and, among
// those, the runs that hold fills (nil: none, or not reported).
type SealedStripe struct {
	Live  []bool
	Runs  [][]Run
	Fills [][]Run
}

// Tail returns K: one past the highest position any live replica of any
// stripe holds, and at least start.
func Tail(start uint64, w int, sealed []SealedStripe) uint64 {
	k := start
	for s, st := range sealed {
		for i, live := range st.Live {
			if !live || len(st.Runs[i]) == 0 {
				continue
			}
			last := st.Runs[i][len(st.Runs[i])-1].End - 1
			if p := Position(last, s, w) + 1; p > k {
				k = p
			}
		}
	}
	return k
}

// PlanSettle decides how to make the live replicas of every stripe of a
// sealed segment [start, k) agree: entries some live replica holds are
// copied to the live replicas that lack them, positions none holds are
// filled. A live replica holding an entry where another holds a fill is
// dropped instead (StripeSettle.Stale; see dropConflicting). Positions at
// or beyond k are left alone (k is the new tail, so none is held). It fails if a stripe has no live replica (its entries may
// be acknowledged and only on dead nodes: recovery must wait) or needs more
// than MaxSettleCopies copies.
func PlanSettle(start, k uint64, w int, sealed []SealedStripe) ([]StripeSettle, error) {
	if len(sealed) != w {
		return nil, fmt.Errorf("%w: %d sealed stripes, want %d", ErrInvalid, len(sealed), w)
	}
	out := make([]StripeSettle, 0, w)
	for s, st := range sealed {
		var live []int
		for i, ok := range st.Live {
			if ok {
				live = append(live, i)
			}
		}
		if len(live) == 0 {
			return nil, fmt.Errorf("layout: stripe %d has no reachable replica; recovery waits for one", s)
		}
		ss := StripeSettle{Stripe: s}
		live, ss.Stale = dropConflicting(st, live)
		lo, hi := LocalRange(start, k, s, w)
		// Walk [lo, hi) in stretches where every live replica's membership
		// is constant, so long runs cost O(runs), not O(positions).
		for l := lo; l < hi; {
			e, have, lack := stretch(st.Runs, live, l, hi)
			switch {
			case len(have) == 0:
				if n := len(ss.Fills); n > 0 && ss.Fills[n-1].End == l {
					ss.Fills[n-1].End = e
				} else {
					ss.Fills = append(ss.Fills, Run{l, e})
				}
			case len(lack) == 0:
				ss.MaxWritten = Position(e-1, s, w) + 1
			default: // e == l+1
				if len(ss.Copies) >= MaxSettleCopies {
					return nil, fmt.Errorf("layout: stripe %d: settle needs more than %d copies; a replica lost data", s, MaxSettleCopies)
				}
				ss.Copies = append(ss.Copies, Copy{Pos: Position(l, s, w), From: have[0], To: lack, Have: have})
				ss.MaxWritten = Position(l, s, w) + 1
			}
			l = e
		}
		out = append(out, ss)
	}
	return out, nil
}

// dropConflicting resolves positions where live replicas disagree: one
// holds a fill where another holds an entry (data or trim). That happens
// only when an earlier recovery attempt at this epoch settled while a
// replica was unreachable (a seal that timed out, a settle that failed
// before the layout committed) and that replica then answered: the
// attempt filled a position the unreachable one held. Neither entry can
// have been acknowledged (an acknowledged entry is on every replica, and
// write-once keeps a fill off a replica that holds it) or read (a sealed
// replica refuses readers of an older epoch until the layout commits), so
// either may win; fills win because settle cannot overwrite them. Each
// live replica in turn drops every other live replica holding an entry
// under one of its fills. The replica doing the dropping stays live, so
// at least one survives, and no two survivors disagree.
func dropConflicting(st SealedStripe, live []int) (keep, stale []int) {
	dropped := map[int]bool{}
	for _, r := range live {
		if dropped[r] || r >= len(st.Fills) || len(st.Fills[r]) == 0 {
			continue
		}
		for _, o := range live {
			if o == r || dropped[o] {
				continue
			}
			var of []Run
			if o < len(st.Fills) {
				of = st.Fills[o]
			}
			if overlaps(subtractRuns(st.Runs[o], of), st.Fills[r]) {
				dropped[o] = true
				stale = append(stale, o)
			}
		}
	}
	if len(stale) == 0 {
		return live, nil
	}
	for _, r := range live {
		if !dropped[r] {
			keep = append(keep, r)
		}
	}
	sort.Ints(stale)
	return keep, stale
}

// subtractRuns returns a minus b (both sorted, disjoint runs).
func subtractRuns(a, b []Run) []Run {
	var out []Run
	j := 0
	for _, r := range a {
		start := r.Start
		for j < len(b) && b[j].End <= start {
			j++
		}
		for k := j; k < len(b) && b[k].Start < r.End; k++ {
			if b[k].Start > start {
				out = append(out, Run{start, b[k].Start})
			}
			start = max(start, b[k].End)
		}
		if start < r.End {
			out = append(out, Run{start, r.End})
		}
	}
	return out
}

// overlaps reports whether two sorted, disjoint run lists share a position.
func overlaps(a, b []Run) bool {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i].End <= b[j].Start:
			i++
		case b[j].End <= a[i].Start:
			j++
		default:
			return true
		}
	}
	return false
}

// stretch returns the end e of the stretch [l, e) in which every live
// replica either holds every position or none, and which live replicas
// hold l (have) and which lack it (lack). When some hold l and others do
// not, the stretch is the single position l.
func stretch(runs [][]Run, live []int, l, hi uint64) (e uint64, have, lack []int) {
	e = hi
	for _, i := range live {
		rs := runs[i]
		j := sort.Search(len(rs), func(j int) bool { return rs[j].End > l })
		if j < len(rs) && rs[j].Start <= l {
			have = append(have, i)
			e = min(e, rs[j].End)
		} else {
			lack = append(lack, i)
			if j < len(rs) {
				e = min(e, rs[j].Start)
			}
		}
	}
	if len(have) > 0 && len(lack) > 0 {
		e = l + 1
	}
	return e, have, lack
}

// Recover returns the layout recovery installs: the active segment (if
// any) closed at k with its unreachable replicas marked stale, or dropped
// when it holds nothing (k == start); then a new active segment at k,
// written in epoch+1, on the given freshly placed stripes. Segments that
// would end at or below trimBefore are dropped.
func Recover(old Layout, w int, k uint64, live [][]bool, fresh [][]Replica, trimBefore uint64) (Layout, error) {
	if len(fresh) != w {
		return Layout{}, fmt.Errorf("%w: %d new stripes, want %d", ErrInvalid, len(fresh), w)
	}
	nl := old.Clone()
	start := uint64(0)
	if act, ok := old.Active(); ok {
		if k < act.Start {
			return Layout{}, fmt.Errorf("%w: tail %d below the active segment's start %d", ErrInvalid, k, act.Start)
		}
		i := len(nl.Segments) - 1
		if k == act.Start {
			nl.Segments = nl.Segments[:i]
		} else {
			seg := &nl.Segments[i]
			seg.End = k
			if len(live) != w {
				return Layout{}, fmt.Errorf("%w: liveness of %d stripes, want %d", ErrInvalid, len(live), w)
			}
			for s := range seg.Stripes {
				for r := range seg.Stripes[s] {
					if !live[s][r] {
						seg.Stripes[s][r].Stale = true
					}
				}
			}
		}
		start = k
	} else if n := len(nl.Segments); n > 0 {
		start = nl.Segments[n-1].End
		if k > start {
			return Layout{}, fmt.Errorf("%w: tail %d beyond the closed log's end %d", ErrInvalid, k, start)
		}
	}
	nl.Epoch++
	nl.Segments = append(nl.Segments, Segment{ID: nl.NextSegment, Start: start, Epoch: nl.Epoch, Stripes: fresh})
	nl.NextSegment++
	nl = Trim(nl, trimBefore)
	if err := nl.Validate(w); err != nil {
		return Layout{}, err
	}
	return nl, nil
}

// Trim drops the closed segments that end at or below before.
func Trim(l Layout, before uint64) Layout {
	i := 0
	for i < len(l.Segments) && !l.Segments[i].Open() && l.Segments[i].End <= before {
		i++
	}
	if i == 0 {
		return l
	}
	out := l.Clone()
	out.Segments = out.Segments[i:]
	return out
}

// MarkFresh returns the layout with replica r of stripe s of segment id,
// a stale replica on device dev, marked fresh again (repair copied the
// segment to it). It fails if that replica is no longer a stale one on
// dev: re-homed meanwhile, or already repaired by another attempt.
func MarkFresh(l Layout, id uint32, s, r int, dev string) (Layout, error) {
	out, seg, err := editReplica(l, id, s, r)
	if err != nil {
		return Layout{}, err
	}
	if rep := seg.Stripes[s][r]; rep.Device != dev || !rep.Stale {
		return Layout{}, fmt.Errorf("%w: replica %d of stripe %d in segment %d is %s, not a stale replica on %s", ErrInvalid, r, s, id, rep, dev)
	}
	seg.Stripes[s][r].Stale = false
	return out, nil
}

// editReplica returns a copy of l to change replica r of stripe s of
// segment id in, and that segment in the copy; it fails if there is no
// such replica.
func editReplica(l Layout, id uint32, s, r int) (Layout, *Segment, error) {
	out := l.Clone()
	for i := range out.Segments {
		seg := &out.Segments[i]
		if seg.ID != id {
			continue
		}
		if s < 0 || s >= len(seg.Stripes) || r < 0 || r >= len(seg.Stripes[s]) {
			return Layout{}, nil, fmt.Errorf("%w: no replica %d of stripe %d in segment %d", ErrInvalid, r, s, id)
		}
		return out, seg, nil
	}
	return Layout{}, nil, fmt.Errorf("%w: no segment %d", ErrInvalid, id)
}

// StaleReplica names a replica that repair should bring back.
type StaleReplica struct {
	Segment uint32
	Stripe  int
	Replica int
	Node    string
}

// StaleReplicas lists the stale replicas whose node is up, oldest segment
// first.
func StaleReplicas(l Layout, up func(node string) bool) []StaleReplica {
	var out []StaleReplica
	for _, seg := range l.Segments {
		for s, st := range seg.Stripes {
			for r, rep := range st {
				if rep.Stale && up(rep.Node) {
					out = append(out, StaleReplica{Segment: seg.ID, Stripe: s, Replica: r, Node: rep.Node})
				}
			}
		}
	}
	return out
}

// LostReplicas lists the replicas of closed segments, fresh or stale,
// whose node is gone (down long enough that waiting for it to return is
// the greater risk), oldest segment first. Each is re-homed: Rehome points
// it at a device on a live node, and repair copies the stripe there. The
// active segment is not listed: recovery closes it around a dead node.
func LostReplicas(l Layout, gone func(node string) bool) []StaleReplica {
	var out []StaleReplica
	for _, seg := range l.Segments {
		if seg.Open() {
			continue
		}
		for s, st := range seg.Stripes {
			for r, rep := range st {
				if gone(rep.Node) {
					out = append(out, StaleReplica{Segment: seg.ID, Stripe: s, Replica: r, Node: rep.Node})
				}
			}
		}
	}
	return out
}

// Rehome returns the layout with replica r of stripe s of closed segment
// id moved to the replica to (a device on a live node), marked stale:
// repair copies the stripe to it and marks it fresh. The stripe must keep
// a fresh replica elsewhere (the copy's source) and must not hold to's
// device already.
func Rehome(l Layout, id uint32, s, r int, to Replica) (Layout, error) {
	out, seg, err := editReplica(l, id, s, r)
	if err != nil {
		return Layout{}, err
	}
	if seg.Open() {
		return Layout{}, fmt.Errorf("%w: segment %d is open; recovery closes it first", ErrInvalid, id)
	}
	fresh := false
	for j, rep := range seg.Stripes[s] {
		if j == r {
			continue
		}
		if rep.Device == to.Device {
			return Layout{}, fmt.Errorf("%w: stripe %d of segment %d already has a replica on %s", ErrInvalid, s, id, to.Device)
		}
		fresh = fresh || !rep.Stale
	}
	if !fresh {
		return Layout{}, fmt.Errorf("%w: stripe %d of segment %d has no other fresh replica to copy from", ErrInvalid, s, id)
	}
	seg.Stripes[s][r] = Replica{Node: to.Node, Device: to.Device, Stale: true}
	return out, nil
}

// NodeLoad is a candidate host for a sequencer.
type NodeLoad struct {
	Node       string
	Up         bool
	Sequencers int // sequencers it hosts now
}

// ChooseHost picks the node to host log's sequencer: the up node hosting
// the fewest sequencers, never exclude (the host whose lease just ended:
// it is dead or cut off even if membership still lists it up). Ties go to
// the node that ranks first by a hash of the log's and node's names, so
// logs spread over equally loaded nodes yet every node computes the same
// answer. This is the least-loaded balancer the policies hook replaces.
func ChooseHost(log string, nodes []NodeLoad, exclude string) (string, bool) {
	best, bestLoad, bestRank := "", 0, uint64(0)
	for _, n := range nodes {
		if !n.Up || n.Node == exclude || n.Node == "" {
			continue
		}
		h := fnv.New64a()
		h.Write([]byte(log + "\x00" + n.Node))
		rank := h.Sum64()
		if best == "" || n.Sequencers < bestLoad || (n.Sequencers == bestLoad && rank < bestRank) {
			best, bestLoad, bestRank = n.Node, n.Sequencers, rank
		}
	}
	return best, best != ""
}

// String prints the layout compactly (used by tests and `log status`).
func (l Layout) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "epoch %d next %d\n", l.Epoch, l.NextSegment)
	for _, s := range l.Segments {
		end := "open"
		if !s.Open() {
			end = fmt.Sprint(s.End)
		}
		fmt.Fprintf(&b, "segment %d [%d, %s) epoch %d:", s.ID, s.Start, end, s.Epoch)
		for i, st := range s.Stripes {
			var rs []string
			for _, r := range st {
				rs = append(rs, r.String())
			}
			fmt.Fprintf(&b, " %d=%s", i, strings.Join(rs, ","))
		}
		b.WriteString("\n")
	}
	return b.String()
}
