package nemesis

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"
)

// Kind is a fault.
type Kind string

// Faults.
const (
	// Kill sends SIGKILL to a node (or the holder of a role) and restarts
	// it after Duration.
	Kill Kind = "kill"
	// Pause stops a node with SIGSTOP for Duration (a long GC pause, a
	// stalled VM: its leases expire while it still believes it holds them).
	Pause Kind = "pause"
	// Isolate cuts (or blackholes) every link to and from a node.
	Isolate Kind = "isolate"
	// Partition splits the nodes in two sides that cannot talk.
	Partition Kind = "partition"
	// Delay slows every link to and from a node.
	Delay Kind = "delay"
	// Drop resets a fraction of the connections to and from a node.
	Drop Kind = "drop"
	// DiskEIO makes a device return EIO on reads or writes; the device
	// fails, and healing restarts its node (a replaced disk).
	DiskEIO Kind = "disk-eio"
	// DiskFull makes a device refuse growing writes with ENOSPC.
	DiskFull Kind = "disk-full"
	// DiskSlow adds latency to every operation of a device.
	DiskSlow Kind = "disk-slow"
	// BitRot flips a byte in one replica file of an egroup (at most once
	// per egroup per run).
	BitRot Kind = "bitrot"
)

// Kinds lists every fault, in the order schedules are printed with.
var Kinds = []Kind{Kill, Pause, Isolate, Partition, Delay, Drop, DiskEIO, DiskFull, DiskSlow, BitRot}

// Roles a kill may target, resolved when the event runs.
const (
	RoleEtcdLeader    = "etcd-leader"
	RoleCuratorMaster = "curator-master"
)

// Event is one fault.
type Event struct {
	Seq  int           `json:"seq"`
	At   time.Duration `json:"at"` // from the start of the fault phase
	Kind Kind          `json:"kind"`
	// Node is the target, or "" when Role names it.
	Node string `json:"node,omitempty"`
	Role string `json:"role,omitempty"`
	// Sides of a partition.
	Sides [2][]string `json:"sides,omitempty"`
	// Device (a name such as "hdd0") of a disk fault.
	Device string `json:"device,omitempty"`
	// Mode: "cut" or "blackhole" (isolate, partition); "read" or "write"
	// (disk-eio).
	Mode string `json:"mode,omitempty"`
	// Duration until the fault is healed (0: instantaneous, bit rot).
	Duration time.Duration `json:"duration,omitempty"`
	// Parameters.
	Delay    time.Duration `json:"delay,omitempty"`
	DropRate float64       `json:"drop_rate,omitempty"`
	Latency  time.Duration `json:"latency,omitempty"`
	// Pick chooses, at run time, which file and byte bit rot flips.
	Pick uint64 `json:"pick,omitempty"`
}

func (e Event) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%6.1fs #%d %s", e.At.Seconds(), e.Seq, e.Kind)
	switch {
	case e.Kind == Partition:
		fmt.Fprintf(&b, " %s|%s", strings.Join(e.Sides[0], ","), strings.Join(e.Sides[1], ","))
	case e.Role != "":
		fmt.Fprintf(&b, " role=%s", e.Role)
	default:
		fmt.Fprintf(&b, " %s", e.Node)
	}
	if e.Device != "" {
		fmt.Fprintf(&b, "/%s", e.Device)
	}
	if e.Mode != "" {
		fmt.Fprintf(&b, " %s", e.Mode)
	}
	if e.Delay > 0 {
		fmt.Fprintf(&b, " delay=%s", e.Delay)
	}
	if e.DropRate > 0 {
		fmt.Fprintf(&b, " drop=%.2f", e.DropRate)
	}
	if e.Latency > 0 {
		fmt.Fprintf(&b, " latency=%s", e.Latency)
	}
	if e.Kind == BitRot {
		fmt.Fprintf(&b, " pick=%d", e.Pick%1000)
	}
	if e.Duration > 0 {
		fmt.Fprintf(&b, " for %.1fs", e.Duration.Seconds())
	}
	return b.String()
}

// Cluster is the shape of the cluster under test.
type Cluster struct {
	Nodes   []string // node IDs
	Members []string // the nodes running etcd members
	Devices []string // device names every node has
}

// Options shape a schedule. Zero values mean defaults.
type Options struct {
	// Events is the number of faults (0: 60).
	Events int
	// Interval is the mean gap between faults (0: 1 s); gaps are uniform
	// in [Interval/2, 3·Interval/2].
	Interval time.Duration
	// Kinds enables faults (empty: all) ...
	Kinds []Kind
	// ... drawn with these weights (nil: DefaultWeights).
	Weights map[Kind]int
	// MaxImpairedNodes bounds the nodes down, paused, isolated, on the
	// minority side or with a failed device at once (0: 2, which keeps one
	// replica of any=3 data reachable).
	MaxImpairedNodes int
	// MinDuration and MaxDuration bound how long a fault lasts (0: 1 s and
	// 8 s).
	MinDuration, MaxDuration time.Duration
	// RestartTime is how long a restarted node takes to serve again, and
	// PauseRecoverTime a resumed or reconnected one: an impairment counts
	// until then (0: 8 s and 3 s).
	RestartTime, PauseRecoverTime time.Duration
}

// DefaultWeights favour the faults that find the most bugs: crashes,
// partitions and bit rot.
var DefaultWeights = map[Kind]int{
	Kill: 24, Pause: 8, Isolate: 12, Partition: 10, Delay: 6, Drop: 6,
	DiskEIO: 8, DiskFull: 5, DiskSlow: 5, BitRot: 12,
}

// EnsureDefaults fills zero fields.
func (o *Options) EnsureDefaults() {
	if o.Events == 0 {
		o.Events = 60
	}
	if o.Interval == 0 {
		o.Interval = time.Second
	}
	if len(o.Kinds) == 0 {
		o.Kinds = Kinds
	}
	if o.Weights == nil {
		o.Weights = DefaultWeights
	}
	if o.MaxImpairedNodes == 0 {
		o.MaxImpairedNodes = 2
	}
	if o.MinDuration == 0 {
		o.MinDuration = time.Second
	}
	if o.MaxDuration == 0 {
		o.MaxDuration = 8 * time.Second
	}
	if o.RestartTime == 0 {
		o.RestartTime = 8 * time.Second
	}
	if o.PauseRecoverTime == 0 {
		o.PauseRecoverTime = 3 * time.Second
	}
}

// Validate rejects impossible options.
func (o *Options) Validate(c Cluster) error {
	if o.Events < 0 || o.Events > 1_000_000 {
		return fmt.Errorf("nemesis: %d events: want 0..1000000", o.Events)
	}
	if o.Interval <= 0 || o.MinDuration <= 0 || o.MaxDuration < o.MinDuration {
		return fmt.Errorf("nemesis: interval %s, durations %s..%s: want positive, min <= max", o.Interval, o.MinDuration, o.MaxDuration)
	}
	for _, k := range o.Kinds {
		if _, ok := o.Weights[k]; !ok {
			return fmt.Errorf("nemesis: unknown fault %q (have %s)", k, kindNames())
		}
	}
	if len(c.Nodes) < 3 || len(c.Members) < 3 || len(c.Members)%2 == 0 {
		return fmt.Errorf("nemesis: %d nodes and %d etcd members: want >= 3 nodes and an odd number >= 3 of members (one may fail)", len(c.Nodes), len(c.Members))
	}
	if o.MaxImpairedNodes < 1 || o.MaxImpairedNodes >= len(c.Nodes) {
		return fmt.Errorf("nemesis: max impaired nodes %d: want 1..%d", o.MaxImpairedNodes, len(c.Nodes)-1)
	}
	return nil
}

func kindNames() string {
	var s []string
	for _, k := range Kinds {
		s = append(s, string(k))
	}
	return strings.Join(s, ", ")
}

// ParseKinds parses a comma-separated list of fault kinds.
func ParseKinds(s string) ([]Kind, error) {
	if strings.TrimSpace(s) == "" || s == "all" {
		return nil, nil
	}
	var out []Kind
	for _, f := range strings.Split(s, ",") {
		k := Kind(strings.TrimSpace(f))
		if _, ok := DefaultWeights[k]; !ok {
			return nil, fmt.Errorf("nemesis: unknown fault %q (have %s)", f, kindNames())
		}
		out = append(out, k)
	}
	return out, nil
}

// impairment is what an event takes away while it lasts.
type impairment struct {
	from, until time.Duration
	nodes       []string // nodes down, paused, cut off or with a failed device
	members     int      // etcd members among them (a role target counts as one)
	wildcard    bool     // a role target: any node
	locks       []string // links and devices no other fault may touch meanwhile
	needsUp     []string // nodes that must not be impaired (their admin API is called)
}

// Impairment describes what an event takes away and for how long (its
// window ends RestartTime or PauseRecoverTime after it is healed).
func impairmentOf(e Event, c Cluster, o *Options) impairment {
	im := impairment{from: e.At}
	isMember := map[string]bool{}
	for _, m := range c.Members {
		isMember[m] = true
	}
	settle := o.PauseRecoverTime
	switch e.Kind {
	case Kill, DiskEIO:
		settle = o.RestartTime
	case BitRot:
		settle = 0
	}
	im.until = e.At + e.Duration + settle
	add := func(n string) {
		im.nodes = append(im.nodes, n)
		if isMember[n] {
			im.members++
		}
	}
	switch e.Kind {
	case Kill, Pause:
		if e.Role != "" {
			im.wildcard = true
			im.members = 1
		} else {
			add(e.Node)
		}
	case Isolate:
		add(e.Node)
		im.locks = append(im.locks, "links:"+e.Node)
	case Partition:
		for _, n := range minoritySide(e.Sides, isMember) {
			add(n)
		}
	case Delay, Drop:
		im.locks = append(im.locks, "links:"+e.Node)
	case DiskEIO:
		add(e.Node)
		im.locks = append(im.locks, "dev:"+e.Node+"/"+e.Device)
	case DiskFull, DiskSlow:
		im.needsUp = append(im.needsUp, e.Node)
		im.locks = append(im.locks, "dev:"+e.Node+"/"+e.Device)
	}
	return im
}

// minoritySide returns the side of a partition without a majority of the
// etcd members: its nodes cannot commit metadata.
func minoritySide(sides [2][]string, isMember map[string]bool) []string {
	count := func(s []string) int {
		k := 0
		for _, n := range s {
			if isMember[n] {
				k++
			}
		}
		return k
	}
	total := count(sides[0]) + count(sides[1])
	if 2*count(sides[0]) > total {
		return sides[1]
	}
	return sides[0]
}

// budget is the impairment in force during a window.
type budget struct {
	nodes   map[string]bool
	extra   int // role targets: nodes not known in advance
	members int
	locks   map[string]bool
	needsUp map[string]bool // nodes another fault acts on through their API
}

func overlapping(ims []impairment, from, until time.Duration) budget {
	b := budget{nodes: map[string]bool{}, locks: map[string]bool{}, needsUp: map[string]bool{}}
	for _, im := range ims {
		if im.from >= until || im.until <= from {
			continue
		}
		for _, n := range im.nodes {
			b.nodes[n] = true
		}
		if im.wildcard {
			b.extra++
		}
		b.members += im.members
		for _, l := range im.locks {
			b.locks[l] = true
		}
		for _, n := range im.needsUp {
			b.needsUp[n] = true
		}
	}
	return b
}

// fits reports whether im can be added to the impairments in force.
func fits(ims []impairment, im impairment, maxNodes int) bool {
	b := overlapping(ims, im.from, im.until)
	for _, n := range append(im.nodes, im.needsUp...) {
		if b.nodes[n] {
			return false // one impairment per node at a time
		}
	}
	for _, n := range im.nodes {
		if b.needsUp[n] {
			return false // a device fault is in force there
		}
	}
	for _, l := range im.locks {
		if b.locks[l] {
			return false
		}
	}
	nodes := len(b.nodes) + b.extra
	for _, n := range im.nodes {
		if !b.nodes[n] {
			nodes++
		}
	}
	if im.wildcard {
		nodes++
	}
	return nodes <= maxNodes && b.members+im.members <= 1
}

// Plan returns the schedule for a cluster, options and seed.
func Plan(c Cluster, o Options, seed uint64) ([]Event, error) {
	o.EnsureDefaults()
	if err := o.Validate(c); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x6e656d65736973))
	var kinds []Kind
	total := 0
	for _, k := range o.Kinds {
		if o.Weights[k] > 0 {
			kinds = append(kinds, k)
			total += o.Weights[k]
		}
	}
	if total == 0 {
		return nil, fmt.Errorf("nemesis: no fault enabled")
	}
	pickKind := func() Kind {
		x := rng.IntN(total)
		for _, k := range kinds {
			if x < o.Weights[k] {
				return k
			}
			x -= o.Weights[k]
		}
		return kinds[len(kinds)-1]
	}
	var events []Event
	var ims []impairment
	at := time.Duration(0)
	const triesPerEvent = 16
	// A drawn kind that does not fit the envelope now waits for it (a
	// quarter interval at a time, up to waitSteps), so that faults with
	// long windows (kills) keep their share instead of losing it to
	// whatever fits at once; after that, any kind that fits goes.
	const waitSteps = 8
	for len(events) < o.Events {
		at += o.Interval/2 + time.Duration(rng.Int64N(int64(o.Interval)+1))
		kind := pickKind()
		placed := false
		for step := 0; step <= waitSteps && !placed; step++ {
			for try := 0; try < triesPerEvent && !placed; try++ {
				k := kind
				if step == waitSteps && try >= triesPerEvent/4 {
					k = pickKind()
				}
				e := draw(rng, k, c, &o)
				e.At = at
				im := impairmentOf(e, c, &o)
				if !fits(ims, im, o.MaxImpairedNodes) {
					continue
				}
				e.Seq = len(events) + 1
				events = append(events, e)
				ims = append(ims, im)
				placed = true
			}
			if !placed && step < waitSteps {
				at += o.Interval / 4
			}
		}
	}
	return events, nil
}

func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	d := lo + time.Duration(rng.Int64N(int64(hi-lo)))
	return d.Round(100 * time.Millisecond)
}

// draw makes a random event of kind k (constraints are checked by the
// caller).
func draw(rng *rand.Rand, k Kind, c Cluster, o *Options) Event {
	e := Event{Kind: k, Duration: between(rng, o.MinDuration, o.MaxDuration)}
	node := c.Nodes[rng.IntN(len(c.Nodes))]
	device := ""
	if len(c.Devices) > 0 {
		device = c.Devices[rng.IntN(len(c.Devices))]
	}
	mode := []string{"cut", "blackhole"}[rng.IntN(2)]
	switch k {
	case Kill:
		switch rng.IntN(4) {
		case 0:
			e.Role = RoleEtcdLeader
		case 1:
			e.Role = RoleCuratorMaster
		default:
			e.Node = node
		}
		e.Duration = between(rng, o.MinDuration, max(o.MinDuration, o.MaxDuration*2/3))
	case Pause:
		e.Node = node
		e.Duration = between(rng, o.MinDuration, max(o.MinDuration, o.MaxDuration*2/3))
	case Isolate:
		e.Node, e.Mode = node, mode
	case Partition:
		perm := rng.Perm(len(c.Nodes))
		cut := 1 + rng.IntN(len(c.Nodes)-1)
		for i, p := range perm {
			side := 0
			if i >= cut {
				side = 1
			}
			e.Sides[side] = append(e.Sides[side], c.Nodes[p])
		}
		sort.Strings(e.Sides[0])
		sort.Strings(e.Sides[1])
		if e.Sides[0][0] > e.Sides[1][0] {
			e.Sides[0], e.Sides[1] = e.Sides[1], e.Sides[0]
		}
		e.Mode = mode
	case Delay:
		e.Node = node
		e.Delay = (time.Duration(20+rng.IntN(380)) * time.Millisecond)
	case Drop:
		e.Node = node
		e.DropRate = float64(20+rng.IntN(61)) / 100
	case DiskEIO:
		e.Node, e.Device = node, device
		e.Mode = []string{"read", "write"}[rng.IntN(2)]
	case DiskFull:
		e.Node, e.Device = node, device
	case DiskSlow:
		e.Node, e.Device = node, device
		e.Latency = time.Duration(20+rng.IntN(280)) * time.Millisecond
	case BitRot:
		e.Node = node
		e.Duration = 0
		e.Pick = rng.Uint64()
	}
	return e
}

// Check verifies a schedule against the safety envelope and returns every
// violation (none for a schedule Plan made).
func Check(c Cluster, o Options, events []Event) []string {
	o.EnsureDefaults()
	var out []string
	var ims []impairment
	for i, e := range events {
		if i > 0 && e.At < events[i-1].At {
			out = append(out, fmt.Sprintf("#%d: out of order", e.Seq))
		}
		if e.Kind != BitRot && e.Duration <= 0 {
			out = append(out, fmt.Sprintf("#%d: %s is never healed", e.Seq, e.Kind))
		}
		im := impairmentOf(e, c, &o)
		if !fits(ims, im, o.MaxImpairedNodes) {
			out = append(out, fmt.Sprintf("#%d %s: exceeds the envelope (%d nodes, one member)", e.Seq, e.Kind, o.MaxImpairedNodes))
		}
		ims = append(ims, im)
	}
	return out
}

// Peak returns the most nodes and etcd members the schedule impairs at
// once (role targets counted as members), by its own model.
func Peak(c Cluster, o Options, events []Event) (nodes, members int) {
	o.EnsureDefaults()
	var ims []impairment
	for _, e := range events {
		ims = append(ims, impairmentOf(e, c, &o))
	}
	for _, im := range ims {
		for _, t := range []time.Duration{im.from, im.until - 1} {
			b := overlapping(ims, t, t+1)
			nodes = max(nodes, len(b.nodes)+b.extra)
			members = max(members, b.members)
		}
	}
	return nodes, members
}

// Counts returns the number of events of each kind.
func Counts(events []Event) map[Kind]int {
	out := map[Kind]int{}
	for _, e := range events {
		out[e.Kind]++
	}
	return out
}
