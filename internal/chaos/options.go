package chaos

import (
	"fmt"
	"strings"
	"time"

	"github.com/terrace-storage/terrace/internal/chaos/nemesis"
	"github.com/terrace-storage/terrace/internal/model"
)

// Options configure a chaos run. Zero values mean defaults.
type Options struct {
	// Binary is the terrace binary the nodes run.
	Binary string
	// Dir holds everything the run writes; it must be empty or absent.
	Dir string
	// Nodes (0: 5) and etcd Members among them (0: 3).
	Nodes, Members int
	// Vector of the bucket under test (0: "any=3").
	Vector string
	// Seed reproduces the schedule and the load's choices (0: random; the
	// summary prints the seed used).
	Seed uint64
	// Events is the number of faults (0: 60) and Interval the mean gap
	// between them (0: 1 s).
	Events   int
	Interval time.Duration
	// Kinds enables faults (empty: all).
	Kinds []nemesis.Kind
	// MaxImpairedNodes bounds the nodes out of service at once (0: 2).
	MaxImpairedNodes int
	// Clients is the number of concurrent S3 clients (0: 6).
	Clients int
	// OpTimeout bounds one client operation (0: 15 s); an operation that
	// runs out of time has an unknown outcome.
	OpTimeout time.Duration
	// Warmup runs the load before the first fault, and Cooldown after
	// everything is healed, to see availability return (0: 5 s, 10 s).
	Warmup, Cooldown time.Duration
	// SettleTimeout bounds the wait for the Curator to bring every object
	// back to its vector, and one Curator job (0: 5 min, plus 0.3 s per
	// event: a long run leaves more garbage for the first full scan).
	SettleTimeout time.Duration
	// BasePort is the first port of the cluster (0: a free block from
	// 21000).
	BasePort int
	// NodeDownAfter is the Curator's stabilisation interval in the chaos
	// cluster (0: 6 s, so that faults regularly trigger re-replication).
	NodeDownAfter time.Duration
	// Progress receives a line per event and phase (nil: none).
	Progress func(format string, args ...any)
}

// EnsureDefaults fills zero fields.
func (o *Options) EnsureDefaults() {
	if o.Nodes == 0 {
		o.Nodes = 5
	}
	if o.Members == 0 {
		o.Members = 3
	}
	if o.Vector == "" {
		o.Vector = "any=3"
	}
	if o.Events == 0 {
		o.Events = 60
	}
	if o.Interval == 0 {
		o.Interval = time.Second
	}
	if o.MaxImpairedNodes == 0 {
		o.MaxImpairedNodes = 2
	}
	if o.Clients == 0 {
		o.Clients = 6
	}
	if o.OpTimeout == 0 {
		o.OpTimeout = 15 * time.Second
	}
	if o.Warmup == 0 {
		o.Warmup = 5 * time.Second
	}
	if o.Cooldown == 0 {
		o.Cooldown = 10 * time.Second
	}
	if o.SettleTimeout == 0 {
		o.SettleTimeout = 5*time.Minute + time.Duration(o.Events)*300*time.Millisecond
	}
	if o.NodeDownAfter == 0 {
		o.NodeDownAfter = 6 * time.Second
	}
	if o.Progress == nil {
		o.Progress = func(string, ...any) {}
	}
}

// Validate rejects bad combinations.
func (o *Options) Validate() error {
	if o.Binary == "" {
		return fmt.Errorf("chaos: no terrace binary")
	}
	if o.Dir == "" {
		return fmt.Errorf("chaos: no directory (--dir)")
	}
	if o.Nodes < 3 || o.Nodes > 9 {
		return fmt.Errorf("chaos: %d nodes: want 3..9", o.Nodes)
	}
	if o.Members < 3 || o.Members > o.Nodes || o.Members%2 == 0 {
		return fmt.Errorf("chaos: %d etcd members for %d nodes: want an odd number from 3 to the node count", o.Members, o.Nodes)
	}
	v, err := model.ParseVector(o.Vector)
	if err != nil {
		return fmt.Errorf("chaos: vector: %w", err)
	}
	if v.Total() > o.Nodes {
		return fmt.Errorf("chaos: vector %s needs more than %d nodes", o.Vector, o.Nodes)
	}
	if o.MaxImpairedNodes >= v.Total() && v.Total() > 1 {
		// With every replica's node impaired at once, data is unreachable
		// (not lost) until healed; the run would only measure that.
		return fmt.Errorf("chaos: max impaired nodes %d: keep it below the vector's %d replicas", o.MaxImpairedNodes, v.Total())
	}
	if o.Events < 0 || o.Clients < 1 || o.Clients > 256 || o.Interval <= 0 {
		return fmt.Errorf("chaos: events %d, clients %d, interval %s: want events >= 0, 1..256 clients, interval > 0", o.Events, o.Clients, o.Interval)
	}
	if o.OpTimeout < time.Second {
		return fmt.Errorf("chaos: op timeout %s: want at least 1s", o.OpTimeout)
	}
	return nil
}

func (o Options) String() string {
	var kinds []string
	for _, k := range o.Kinds {
		kinds = append(kinds, string(k))
	}
	if len(kinds) == 0 {
		kinds = []string{"all"}
	}
	return fmt.Sprintf("nodes=%d members=%d vector=%s seed=%d events=%d interval=%s kinds=%s max_impaired=%d clients=%d op_timeout=%s node_down_after=%s",
		o.Nodes, o.Members, o.Vector, o.Seed, o.Events, o.Interval, strings.Join(kinds, ","), o.MaxImpairedNodes, o.Clients, o.OpTimeout, o.NodeDownAfter)
}
