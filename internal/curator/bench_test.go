package curator

import (
	"context"
	"flag"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/device"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/placement"
)

// BenchmarkFullScan measures a full scan (map over objects, extents,
// egroups and access records; shuffle; reduce; decide) over synthetic
// metadata written straight to Pebble: 20,000 objects of one extent each
// in 625 egroups of 32 extents. It reports records scanned per second.
func BenchmarkFullScan(b *testing.B) {
	kv, local, pol, l := benchNode(b)
	ctx := context.Background()
	const objects, perEgroup = 20_000, 32
	now := time.Now().UnixNano()
	v := model.MustParseVector("hdd=2")
	reps := []meta.EgroupReplica{{Device: "n1/hdd0", Node: "n1", Tier: "hdd"}, {Device: "n1/hdd1", Node: "n1", Tier: "hdd"}}
	for i := 0; i < objects; i += perEgroup {
		var t meta.Txn
		eg := uint64(i/perEgroup + 1)
		t.Put(meta.EgroupKey(eg), meta.Encode(meta.Egroup{Replicas: reps, State: meta.EgroupSealed, Size: perEgroup * 8200, Vector: v, Mtime: now}))
		t.Put(meta.AccessKey(eg), meta.Encode(meta.Access{Atime: now, Reads: 3}))
		for j := i; j < i+perEgroup && j < objects; j++ {
			id := uint64(j + 1)
			t.Put(meta.ExtentKey(id), meta.Encode(meta.Extent{Egroup: eg, Off: int64(j-i) * 8200, Len: 8192, Ctime: now}))
			t.Put(meta.ObjectKey("bench", fmt.Sprintf("k%06d", j)), meta.Encode(meta.Object{Size: 8192, ETag: "x", Vector: v, Extents: []meta.ExtentRef{{ID: id, Len: 8192}}}))
		}
		if _, err := kv.Commit(ctx, &t); err != nil {
			b.Fatal(err)
		}
	}
	c := New(l, kv, local, pol, nil, nil, Options{})
	b.ResetTimer()
	var records int
	for i := 0; i < b.N; i++ {
		res, err := c.scan(ctx, true)
		if err != nil {
			b.Fatal(err)
		}
		records = res.records0
		if _, _, errs := decidePlan(c, res); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// decidePlan runs the decide step of a job on a scan result (benchmarks).
func decidePlan(c *Curator, res *scanResult) ([]decide.Task, decide.Stats, []error) {
	snap := c.snapshotFor()
	c.mu.Lock()
	defer c.mu.Unlock()
	return decide.Plan(snap, res.egroups, c.policy, c.opts.Decide, c.rng, true)
}

// scanEgroups sizes BenchmarkPartialScan (go test -bench PartialScan
// -args -scan-egroups 10000000 for the 10M-record pass in docs/perf.md).
var scanEgroups = flag.Int("scan-egroups", 100_000, "egroup records BenchmarkPartialScan loads")

// BenchmarkPartialScan measures the map stage over the egroup and access
// maps alone (a partial scan: what recovery, tiering and balancing read),
// over -scan-egroups synthetic egroup records with access records on
// Pebble, and reports egroup records mapped per second.
func BenchmarkPartialScan(b *testing.B) {
	kv, local, pol, l := benchNode(b)
	ctx := context.Background()
	egroups := *scanEgroups
	loadEgroups(b, kv, egroups)
	c := New(l, kv, local, pol, nil, nil, Options{})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := c.scan(ctx, false)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.egroups) != egroups {
			b.Fatalf("scanned %d egroups, want %d", len(res.egroups), egroups)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(egroups)*float64(b.N)/b.Elapsed().Seconds(), "egroups/s")
}

// benchNode opens a one-node layer on two hdd directories and Pebble for
// the scan benchmarks, closed when b ends.
func benchNode(b testing.TB) (*meta.Pebble, *object.Local, placement.Policy, *object.Layer) {
	dir := b.TempDir()
	d, err := device.Open("n1/hdd0", device.Spec{Tier: "hdd", Path: filepath.Join(dir, "d"), Capacity: 1 << 40})
	if err != nil {
		b.Fatal(err)
	}
	d2, err := device.Open("n1/hdd1", device.Spec{Tier: "hdd", Path: filepath.Join(dir, "d2"), Capacity: 1 << 40})
	if err != nil {
		b.Fatal(err)
	}
	kv, err := meta.OpenPebble(filepath.Join(dir, "meta"))
	if err != nil {
		b.Fatal(err)
	}
	local := object.NewLocal("n1", "r1", []*device.Device{d, d2})
	pol, _ := placement.New(placement.Config{Name: "fitness"})
	l, err := object.New(kv, local, local, object.Options{Policy: pol})
	if err != nil {
		kv.Close()
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close(); kv.Close() })
	return kv, local, pol, l
}

// BenchmarkMapEgroups measures the map stage alone — what a worker does
// with an "egroups/H" partition: read the egroup and access records of
// its range from Pebble, decode and merge-join them, and emit one record
// per egroup. It reports egroup records per second (the goal is 2M per
// node).
func BenchmarkMapEgroups(b *testing.B) {
	kv, _, _, _ := benchNode(b)
	ctx := context.Background()
	egroups := *scanEgroups
	loadEgroups(b, kv, egroups)
	whole := Partition{Name: "egroups/0", Lo: 0, Hi: math.MaxUint64}
	// Untimed passes while Pebble compacts what the load wrote.
	for start := time.Now(); time.Since(start) < 3*time.Second; {
		if _, err := MapPartition(ctx, kv, whole, func(MapRecord) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
	// "one" maps the range as one partition on one core; "node" maps it
	// as GOMAXPROCS partitions at once, as a node works its share of a
	// scan's partitions (ScanParallelism).
	for _, par := range []int{1, runtime.GOMAXPROCS(0)} {
		name := "one"
		if par > 1 {
			name = fmt.Sprintf("node-%d", par)
		}
		parts := make([]Partition, par)
		step := uint64(egroups)/uint64(par) + 1
		for i := range parts {
			parts[i] = Partition{Name: fmt.Sprintf("egroups/%x", i), Lo: uint64(i) * step, Hi: uint64(i+1)*step - 1}
		}
		parts[par-1].Hi = math.MaxUint64
		// "records" is MapPartition's API (a fresh value per record);
		// "compact" is what a worker streaming compact form and the
		// master's own partitions do: values reused, each egroup turned
		// into its compact record as it is emitted.
		for _, mode := range []string{"records", "compact"} {
			b.Run(name+"/"+mode, func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					var n, accessed atomic.Int64
					err := mapParallel(ctx, parts, par, func(ctx context.Context, p Partition) error {
						if mode == "compact" {
							in := newShapeInterner()
							var last egroupRec
							_, err := mapPartitionReused(ctx, kv, p, func(r MapRecord) error {
								n.Add(1)
								if r.Access != nil {
									accessed.Add(1)
								}
								last = in.rec(r)
								return nil
							})
							_ = last
							return err
						}
						_, err := MapPartition(ctx, kv, p, func(r MapRecord) error {
							n.Add(1)
							if r.Access != nil {
								accessed.Add(1)
							}
							return nil
						})
						return err
					})
					if err != nil {
						b.Fatal(err)
					}
					if n.Load() != int64(egroups) || accessed.Load() != int64(egroups) {
						b.Fatalf("mapped %d egroups (%d with access records), want %d", n.Load(), accessed.Load(), egroups)
					}
				}
				b.ReportMetric(float64(egroups)*float64(b.N)/b.Elapsed().Seconds(), "egroups/s")
			})
		}
	}
}

// loadEgroups writes egroup records 1..n, sealed with two hdd replicas,
// each with an access record.
func loadEgroups(b *testing.B, kv *meta.Pebble, n int) {
	ctx := context.Background()
	now := time.Now().UnixNano()
	v := model.MustParseVector("hdd=2")
	reps := []meta.EgroupReplica{{Device: "n1/hdd0", Node: "n1", Tier: "hdd"}, {Device: "n1/hdd1", Node: "n1", Tier: "hdd"}}
	const perTxn = 60 // two records per egroup; a transaction holds at most 128 operations
	for i := 0; i < n; i += perTxn {
		var t meta.Txn
		for eg := uint64(i + 1); eg <= uint64(min(i+perTxn, n)); eg++ {
			t.Put(meta.EgroupKey(eg), meta.Encode(meta.Egroup{Replicas: reps, State: meta.EgroupSealed, Size: 16 << 20, Vector: v, Mtime: now}))
			t.Put(meta.AccessKey(eg), meta.Encode(meta.Access{Atime: now, Reads: 3}))
		}
		if _, err := kv.Commit(ctx, &t); err != nil {
			b.Fatal(err)
		}
	}
}
