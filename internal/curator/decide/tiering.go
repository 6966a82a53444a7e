package decide

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
)

// Task kinds for tiering and balancing. Each is a replica move: copy to
// the destination, verify, switch metadata, delete the source.
const (
	KindTierDown Kind = "tier-down"
	KindTierUp   Kind = "tier-up"
	KindBalance  Kind = "balance" // records of jobs from before live planning
)

// TierOptions are the ILM thresholds (Curator §3.3; all configurable).
type TierOptions struct {
	// DownAbove (f): a tier whose usage exceeds this sheds cold data.
	DownAbove float64
	// DestBelow (d): the destination tier must be below this usage.
	DestBelow float64
	// Reduce (h): shed until the source's usage fell by this fraction of
	// its capacity.
	Reduce float64
	// BalanceMean (m) and BalanceSpread (s): balance a tier's devices
	// when their mean usage exceeds m and max−min exceeds s. They are the
	// parameters of the planner's disk_balanced rule, which the Curator
	// plans with in every scan (Tiering itself no longer balances).
	BalanceMean   float64
	BalanceSpread float64
	// PromoteReads promotes an egroup read at least this many times within
	// HotWindow from a slower tier to the fastest tier with room below
	// DownAbove.
	PromoteReads int64
	HotWindow    time.Duration
	// StarveReads is the window read count from which an egroup refused
	// promotion for lack of room is evidence of promotion starvation
	// (StillStarved): data clearly hotter than the promotion threshold,
	// worth a tiering run to make room for.
	StarveReads int64
	// MaxMoves bounds tiering and balancing moves per job.
	MaxMoves int
	// MinInterval is the least time between tiering-triggered scans.
	MinInterval time.Duration
	// Rank, when set, orders egroups for tiering instead of recent reads
	// and last touch: lower is colder (demoted first, promoted last). A
	// tiering policy supplies it (internal/policy); it must be pure and
	// cheap, a lookup of values computed before the decision.
	Rank func(Egroup) float64 `json:"-"`
	// DemoteAbove, for the tiers it names, replaces DownAbove (f) as the
	// usage above which the tier sheds cold data; promotions still fill a
	// tier only up to f. A tiering scheduler (internal/curator/tiersched)
	// sets it to tier down now, or never, instead of at f.
	DemoteAbove map[model.Tier]float64 `json:"-"`
	// Skip names egroups tiering leaves alone (another task of the job
	// moves them). Tiering over egs with Skip is tiering over egs without
	// those egroups, without a copy of the rest.
	Skip map[uint64]bool `json:"-"`
}

// DefaultPromoteReads is PromoteReads when unset.
const DefaultPromoteReads = 3

// DefaultStarveFactor sets StarveReads when unset: ten times the
// promotion threshold.
const DefaultStarveFactor = 10

// demoteAbove is the usage above which tier t sheds cold data.
func (o TierOptions) demoteAbove(t model.Tier) float64 {
	if v, ok := o.DemoteAbove[t]; ok {
		return v
	}
	return o.DownAbove
}

// EnsureDefaults fills the paper's defaults: f=75 %, d=90 %, h=15 %,
// m=35 %, s=15 %.
func (o *TierOptions) EnsureDefaults() {
	if o.DownAbove == 0 {
		o.DownAbove = 0.75
	}
	if o.DestBelow == 0 {
		o.DestBelow = 0.90
	}
	if o.Reduce == 0 {
		o.Reduce = 0.15
	}
	if o.BalanceMean == 0 {
		o.BalanceMean = 0.35
	}
	if o.BalanceSpread == 0 {
		o.BalanceSpread = 0.15
	}
	if o.PromoteReads == 0 {
		o.PromoteReads = DefaultPromoteReads
	}
	if o.HotWindow == 0 {
		o.HotWindow = 10 * time.Minute
	}
	if o.StarveReads == 0 {
		o.StarveReads = DefaultStarveFactor * o.PromoteReads
	}
	if o.MaxMoves == 0 {
		o.MaxMoves = 2000
	}
	if o.MinInterval == 0 {
		o.MinInterval = 30 * time.Second
	}
}

// usage tracks projected bytes per device and tier while planning, so
// that every move planned is accounted for in the next decision.
type usage struct {
	dev      map[model.DeviceID]int64
	capacity map[model.DeviceID]int64
	tierUsed map[model.Tier]int64
	tierCap  map[model.Tier]int64
}

func newUsage(s *model.Snapshot) *usage {
	u := &usage{dev: map[model.DeviceID]int64{}, capacity: map[model.DeviceID]int64{}, tierUsed: map[model.Tier]int64{}, tierCap: map[model.Tier]int64{}}
	for _, d := range s.Devices {
		if d.State != model.DeviceUp || !s.NodeUp(d.Node) {
			continue
		}
		u.dev[d.ID] = d.UsedBytes
		u.capacity[d.ID] = d.CapacityBytes
		u.tierUsed[d.Tier] += d.UsedBytes
		u.tierCap[d.Tier] += d.CapacityBytes
	}
	return u
}

func (u *usage) tier(t model.Tier) float64 {
	if u.tierCap[t] == 0 {
		return 1
	}
	return float64(u.tierUsed[t]) / float64(u.tierCap[t])
}

func (u *usage) move(s *model.Snapshot, from, to model.Replica, bytes int64) {
	u.dev[from.Device] -= bytes
	u.dev[to.Device] += bytes
	u.tierUsed[from.Tier] -= bytes
	u.tierUsed[to.Tier] += bytes
}

// movable returns the egroup's replicas on tier t that the vector does not
// pin there: replicas beyond the vector's explicit count for t.
func movable(eg Egroup, t model.Tier) []model.Replica {
	var on []model.Replica
	for _, r := range eg.Replicas {
		if !r.Bad && r.Tier == t {
			on = append(on, r.Replica)
		}
	}
	free := len(on) - eg.Vector.Count(t)
	if free <= 0 {
		return nil
	}
	return on[:free]
}

// coldness orders egroups coldest first: the later of last access and
// last write (Curator §3.3 ranks by atime/mtime).
func lastTouch(eg Egroup) time.Time {
	if eg.Atime.After(eg.Mtime) {
		return eg.Atime
	}
	return eg.Mtime
}

// windowReads is an egroup's read count if its window is current.
func windowReads(now time.Time, o TierOptions, eg *Egroup) int64 {
	if now.Sub(eg.Atime) > o.HotWindow {
		return 0
	}
	return eg.Reads
}

// lastTouchOf is lastTouch without copying the egroup.
func lastTouchOf(eg *Egroup) time.Time {
	if eg.Atime.After(eg.Mtime) {
		return eg.Atime
	}
	return eg.Mtime
}

// placeOn picks a device on tier t for one replica of eg, keeping it
// distinct from the egroup's other replicas.
func placeOn(s *model.Snapshot, pol placement.Policy, rng *rand.Rand, eg Egroup, leaving model.Replica, t model.Tier) (model.Replica, error) {
	var existing []model.Replica
	for _, r := range eg.Replicas {
		if r.Device != leaving.Device && !r.Bad {
			existing = append(existing, r.Replica)
		}
	}
	rs, err := pol.Place(s, placement.Request{Vector: model.Vector{Counts: map[model.Tier]int{t: 1}}, Existing: existing, Bytes: eg.Size}, rng)
	if err != nil {
		return model.Replica{}, err
	}
	return rs[0], nil
}

// slowerTiers returns the tiers slower than t that have devices, nearest
// first (the remote tier last).
func slowerTiers(s *model.Snapshot, t model.Tier) []model.Tier {
	var out []model.Tier
	for _, x := range s.Tiers() {
		if x.Rank() > t.Rank() && x != model.TierMem {
			out = append(out, x)
		}
	}
	return out
}

// Tiering decides demotions (tiers over f shed their coldest unpinned
// replicas to the next slower tier below d until usage fell by h),
// and promotions (egroups read PromoteReads times within HotWindow climb
// to the fastest tier with room below f).
func Tiering(s *model.Snapshot, egs []Egroup, pol placement.Policy, o TierOptions, rng *rand.Rand) []Task {
	o.EnsureDefaults()
	u := newUsage(s)
	moved := map[uint64]bool{}
	sealed := tierable(s, egs, o)
	// Promotion first: hot data on slow tiers hurts clients now.
	tasks, _ := promote(s, sealed, pol, o, rng, u, moved)

	// Demotion: for each tier over f, shed coldest unpinned replicas.
	for _, src := range s.Tiers() {
		if u.tier(src) <= o.demoteAbove(src) {
			continue
		}
		target := u.tierUsed[src] - int64(o.Reduce*float64(u.tierCap[src]))
		for _, eg := range sealed {
			eg := *eg
			if u.tierUsed[src] <= target || len(tasks) >= o.MaxMoves {
				break
			}
			if moved[eg.ID] {
				continue // just promoted
			}
			from := movable(eg, src)
			if len(from) == 0 {
				continue
			}
			for _, dstTier := range slowerTiers(s, src) {
				if u.tier(dstTier) >= o.DestBelow {
					continue
				}
				dst, err := placeOn(s, pol, rng, eg, from[0], dstTier)
				if err != nil {
					continue
				}
				u.move(s, from[0], dst, eg.Size)
				moved[eg.ID] = true
				tasks = append(tasks, Task{Kind: KindTierDown, Egroup: eg.ID, ModRev: eg.ModRev, Add: []model.Replica{dst}, Remove: []model.Replica{from[0]},
					Bytes: eg.Size, Reason: fmt.Sprintf("%s at %.0f%% > %.0f%%, coldest (last touch %s ago)", src, 100*u.tier(src), 100*o.demoteAbove(src), s.Now.Sub(lastTouch(eg)).Round(time.Second))})
				break
			}
		}
	}

	// Disk balancing within tiers is the planner's disk_balanced rule,
	// with BalanceMean and BalanceSpread as its parameters: the Curator
	// plans it in every scan job (internal/curator/liveplan.go).
	return tasks
}

// Promotions decides only the promotions Tiering would: egroups read
// PromoteReads times within HotWindow climb to the fastest tier with room
// below DownAbove. The Curator master runs it on the egroups the access
// tracker reported hot, between scans.
//
// refused are the hot egroups left where they are for lack of room: no
// move was planned for them and a faster tier was skipped because its
// usage (with the moves planned before them) was at or above DownAbove.
// A learned tiering scheduler that keeps the fast tier above f starves
// promotion; the callers keep these egroups for StillStarved.
func Promotions(s *model.Snapshot, egs []Egroup, pol placement.Policy, o TierOptions, rng *rand.Rand) (tasks []Task, refused []uint64) {
	o.EnsureDefaults()
	return promote(s, tierable(s, egs, o), pol, o, rng, newUsage(s), map[uint64]bool{})
}

// StillStarved reports whether eg, refused promotion for lack of room
// (Promotions), is still evidence of promotion starvation at s.Now: its
// reads in the current window reach StarveReads and none of its replicas
// is on the fastest local tier. Refusals of lukewarm data (a scan passing
// by, a hot set moving on) do not count: making room for them would cost
// more moves than they save.
func StillStarved(s *model.Snapshot, eg Egroup, o TierOptions) bool {
	o.EnsureDefaults()
	if windowReads(s.Now, o, &eg) < o.StarveReads {
		return false
	}
	for _, t := range s.Tiers() {
		if t != model.TierMem && t.ForAny(false) {
			return fastestReplicaTier(eg).Rank() > t.Rank()
		}
	}
	return false
}

// tierable returns the sealed, replicated, non-empty egroups not in
// o.Skip, coldest first: fewest reads in the current window, then the
// oldest last touch (Curator §3.3 ranks by atime/mtime; the read count
// keeps a recently written but never-read egroup below a busy one). It
// points into egs rather than copying them (a scan has millions).
func tierable(s *model.Snapshot, egs []Egroup, o TierOptions) []*Egroup {
	sealed := make([]*Egroup, 0, len(egs))
	for i := range egs {
		eg := &egs[i]
		// Strips of an erasure-coded egroup are not interchangeable
		// replicas: tiering moves only replicated egroups.
		if !eg.Open && eg.Size > 0 && eg.EC.K == 0 && !o.Skip[eg.ID] {
			sealed = append(sealed, eg)
		}
	}
	// The ordering keys are computed once per egroup, not in every
	// comparison (a sort makes n·log n comparisons, and a rank hook — a
	// policy — runs once per egroup instead of 2·log n times), and ties
	// are broken by position, which makes an unstable sort (pdqsort,
	// n·log n moves) give the stable order (symMerge moves n·log² n).
	keyed := make([]keyedEgroup, len(sealed))
	for i, eg := range sealed {
		keyed[i] = keyedEgroup{key: coldKeyOf(s.Now, o, eg), pos: int32(i), eg: eg}
	}
	slices.SortFunc(keyed, func(a, b keyedEgroup) int {
		if c := a.key.compare(b.key); c != 0 {
			return c
		}
		return cmp.Compare(a.pos, b.pos)
	})
	for i := range keyed {
		sealed[i] = keyed[i].eg
	}
	return sealed
}

// coldKey orders egroups for demotion, coldest first: by the rank hook's
// value if there is one (a NaN ranks coldest, as cmp.Compare orders
// floats), then by reads in the current window, then by the last touch
// (the later of last access and last write).
type coldKey struct {
	rank  float64
	reads int64
	touch int64 // unixTime of the last touch
}

// keyedEgroup is 40 bytes: at 10M egroups the keys of a sort are 400 MB.
type keyedEgroup struct {
	key coldKey
	eg  *Egroup
	pos int32 // position before sorting (a scan holds fewer than 2^31 egroups)
}

func coldKeyOf(now time.Time, o TierOptions, eg *Egroup) coldKey {
	k := coldKey{reads: windowReads(now, o, eg), touch: unixTime(lastTouchOf(eg))}
	if o.Rank != nil {
		k.rank = o.Rank(*eg)
	}
	return k
}

// unixTime is t in Unix nanoseconds, clamped to the int64 range: the
// zero time (a view without times) sorts first, as time.Time.Compare has
// it; times before 1678 or after 2262, which no record holds, compare
// equal among themselves.
func unixTime(t time.Time) int64 {
	switch {
	case t.Before(minUnixTime):
		return math.MinInt64
	case t.After(maxUnixTime):
		return math.MaxInt64
	}
	return t.UnixNano()
}

var (
	minUnixTime = time.Unix(0, math.MinInt64+1)
	maxUnixTime = time.Unix(0, math.MaxInt64)
)

func (a coldKey) compare(b coldKey) int {
	if c := cmp.Compare(a.rank, b.rank); c != 0 {
		return c
	}
	if c := cmp.Compare(a.reads, b.reads); c != 0 {
		return c
	}
	return cmp.Compare(a.touch, b.touch)
}

// promote walks sealed hottest first and moves each hot egroup's replica
// on its fastest tier up to the fastest tier with room, recording the
// moves in u and moved. refused are the hot egroups it left in place
// because a faster tier had no room below DownAbove (see Promotions).
func promote(s *model.Snapshot, sealed []*Egroup, pol placement.Policy, o TierOptions, rng *rand.Rand, u *usage, moved map[uint64]bool) (tasks []Task, refused []uint64) {
	for i := len(sealed) - 1; i >= 0 && len(tasks) < o.MaxMoves; i-- {
		if eg := sealed[i]; eg.Reads < o.PromoteReads || s.Now.Sub(eg.Atime) > o.HotWindow {
			continue
		}
		eg := *sealed[i]
		best := fastestReplicaTier(eg)
		if len(movable(eg, best)) == 0 {
			continue // pinned where it is: room would not move it
		}
		full, placed := false, false
		for _, t := range s.Tiers() {
			if t == model.TierMem || t.Rank() >= best.Rank() {
				continue
			}
			if u.tier(t) >= o.DownAbove {
				full = full || u.tierCap[t] > 0 // a tier with no device up is not full
				continue
			}
			src := movable(eg, best)
			if len(src) == 0 {
				break
			}
			dst, err := placeOn(s, pol, rng, eg, src[0], t)
			if err != nil {
				continue
			}
			u.move(s, src[0], dst, eg.Size)
			moved[eg.ID] = true
			placed = true
			tasks = append(tasks, Task{Kind: KindTierUp, Egroup: eg.ID, ModRev: eg.ModRev, Add: []model.Replica{dst}, Remove: []model.Replica{src[0]},
				Bytes: eg.Size, Reason: fmt.Sprintf("%d reads, last %s ago, %s→%s", eg.Reads, s.Now.Sub(eg.Atime).Round(time.Second), best, t)})
			break
		}
		if full && !placed {
			refused = append(refused, eg.ID)
		}
	}
	return tasks, refused
}

func fastestReplicaTier(eg Egroup) model.Tier {
	best := model.TierAny
	for _, r := range eg.Replicas {
		if !r.Bad && r.Tier.Rank() < best.Rank() {
			best = r.Tier
		}
	}
	return best
}

// Recall brings replicas on the remote tier back to the fastest local tier
// with room below DownAbove (`terrace tier recall PREFIX`).
func Recall(s *model.Snapshot, egs []Egroup, pol placement.Policy, o TierOptions, rng *rand.Rand) []Task {
	o.EnsureDefaults()
	u := newUsage(s)
	var tasks []Task
	for _, eg := range egs {
		if eg.Open || eg.EC.K > 0 {
			continue
		}
		for _, r := range eg.Replicas {
			if r.Bad || r.Tier != model.TierRemote {
				continue
			}
			for _, t := range s.Tiers() {
				if !t.ForAny(false) || u.tier(t) >= o.DownAbove {
					continue
				}
				dst, err := placeOn(s, pol, rng, eg, r.Replica, t)
				if err != nil {
					continue
				}
				u.move(s, r.Replica, dst, eg.Size)
				tasks = append(tasks, Task{Kind: KindTierUp, Egroup: eg.ID, ModRev: eg.ModRev, Add: []model.Replica{dst},
					Remove: []model.Replica{r.Replica}, Bytes: eg.Size, Reason: "recall from remote to " + string(t)})
				break
			}
			break // one move per egroup per job: the next job sees the new revision
		}
	}
	return tasks
}
