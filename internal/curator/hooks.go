package curator

import (
	"context"
	"sort"
	"time"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

// Hooks through which programmable policies (internal/policy) steer the
// Curator. Both are optional; without them the Curator behaves as
// configured. The Curator never imports the policy package: the server
// wires implementations in through Options.

// TierTuner adjusts the tiering decision: the thresholds, the coldness
// order (TierOptions.Rank) and whether tiering runs at all this time. It
// is called with the job's snapshot and egroups (nil egroups when the
// Curator only asks whether a tier is over its threshold) and must be
// pure and quick; on any failure it returns base and true.
type TierTuner interface {
	TuneTiering(s *model.Snapshot, egs []decide.Egroup, base decide.TierOptions) (o decide.TierOptions, run bool)
}

// PartitionLoad is one scan partition as the balancer sees it: its name
// (map/hex-digit), the records it held at the last scan and the node that
// scanned it.
type PartitionLoad struct {
	Name    string       `json:"name"`
	Records int          `json:"records"`
	Node    model.NodeID `json:"node,omitempty"`
	// Start and End bound the partition's map at the last scan.
	Start time.Time `json:"start,omitzero"`
	End   time.Time `json:"end,omitzero"`
}

// ScanBalancer spreads the map stage of a scan over the nodes (Mantle's
// load balancing applied to the Curator's background work). The nodes a
// partition is assigned to read it from their metadata store, decode and
// join it (MapPartition) and send the output back; the master reduces
// and decides.
type ScanBalancer interface {
	// AssignPartitions returns the node that maps each partition. A
	// partition left out, or assigned to self, is mapped by the master.
	AssignPartitions(s *model.Snapshot, self model.NodeID, parts []PartitionLoad) map[string]model.NodeID
	// MapPartition runs MapPartition for part on node and returns its
	// whole output, or an error (the master then maps it itself).
	MapPartition(ctx context.Context, node model.NodeID, part Partition) (MapOutput, error)
}

// StreamingScanBalancer is a ScanBalancer that also hands a partition's
// output over record by record as it arrives (ReadMapStreamTo), so the
// master never holds a partition's decoded records, only the compact
// form it keeps per egroup. If the map fails part way, the master drops
// what was emitted and maps the partition itself.
type StreamingScanBalancer interface {
	ScanBalancer
	// MapPartitionTo runs MapPartition for part on node, calling emit
	// for each output record in key order, and returns the metadata
	// records the node read.
	MapPartitionTo(ctx context.Context, node model.NodeID, part Partition, emit func(MapRecord)) (read int, err error)
}

// partitionNames lists every partition a scan may read, sorted.
func partitionNames() []string {
	var out []string
	for _, m := range []string{"egroups", "extents"} {
		for _, p := range partitionsOf(m, 0, 0) {
			out = append(out, p.Name)
		}
	}
	// An owner map has up to 16 partitions (one per bucket with fewer
	// than 16 buckets): all 16 names are offered, those a scan does not
	// have are not used.
	for _, m := range ownerMaps {
		for i := range 16 {
			out = append(out, m+"/"+"0123456789abcdef"[i:i+1])
		}
	}
	sort.Strings(out)
	return out
}

// assignPartitions asks the balancer for this scan's assignment.
func (c *Curator) assignPartitions(s *model.Snapshot) map[string]model.NodeID {
	if c.opts.Balancer == nil {
		return nil
	}
	a := c.opts.Balancer.AssignPartitions(s, c.opts.Self, c.PartitionLoads())
	// A node whose map failed lately (partitioned, paused, overloaded)
	// would only cost this scan its idle timeout again: its partitions stay
	// here until mapRetryAfter has passed.
	var out map[string]model.NodeID
	if a != nil {
		out = c.withoutFailed(a) // a copy: a may be the balancer's own
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.assigned = out
	return out
}

// mapRetryAfter is how long a node whose partition map failed is left out
// of scan assignments.
const mapRetryAfter = time.Minute

// pageScanner is the part of meta.KV a scan reads through.
type pageScanner interface {
	Scan(ctx context.Context, start, end []byte, limit int) ([]meta.Item, error)
}

// Assignment returns the partition assignment of the last scan (empty
// without a balancer: the master scans everything).
func (c *Curator) Assignment() map[string]model.NodeID {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]model.NodeID, len(c.assigned))
	for k, v := range c.assigned {
		out[k] = v
	}
	return out
}

// ScanEgroups runs a partial scan and returns the joined egroups and the
// snapshot a job would decide on, deciding and executing nothing: the
// input `terrace policy test` runs a tiering or rule policy against. It
// reads every partition here and leaves the balancer's assignment alone.
func (c *Curator) ScanEgroups(ctx context.Context) ([]decide.Egroup, *model.Snapshot, error) {
	res, err := c.scanAssigned(ctx, false, nil)
	if err != nil {
		return nil, nil, err
	}
	defer res.release()
	return res.egroups, c.snapshotFor(), nil
}

// tierOptions returns the tiering options for one decision and whether
// tiering runs.
func (c *Curator) tierOptions(s *model.Snapshot, egs []decide.Egroup) (decide.TierOptions, bool) {
	o := c.opts.Tier
	if c.opts.Tuner == nil {
		return o, true
	}
	return c.opts.Tuner.TuneTiering(s, egs, o)
}

// PartitionLoads returns every scan partition with the records it held
// and the node that scanned it at the last scan.
func (c *Curator) PartitionLoads() []PartitionLoad {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]PartitionLoad, 0, 32)
	for _, n := range partitionNames() {
		pl := c.partLoad[n]
		pl.Name = n
		out = append(out, pl)
	}
	return out
}
