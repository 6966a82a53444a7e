// Package scansim measures the Curator's scan at scale: it writes N
// synthetic egroup records (with access records, and for a full scan the
// extent and object records that reference them) straight into an
// in-process Pebble metadata store, then runs the production scan —
// curator.(*Curator).TimeScan: the map stage over 16 partitions, the
// reduce, and decide.Plan and tiering on the result — and reports its wall time,
// records per second and the process's peak resident set size. It is
// what `terrace sim scan` runs.
package scansim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/prometheus/procfs"

	"github.com/terrace-storage/terrace/internal/curator"
	"github.com/terrace-storage/terrace/internal/device"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/placement"
)

// Options size a run.
type Options struct {
	Egroups int  // egroup records (default 100,000)
	Nodes   int  // nodes the replicas spread over, 3 devices each (default 10)
	Full    bool // a full scan: also extent and object records
	// Extents per egroup in a full scan (default 4); about one in ten has
	// no object referencing it (garbage).
	Extents int
	Seed    uint64 // default 1
	// Dir holds the Pebble store and the devices ("": a temporary
	// directory, removed at the end).
	Dir string
	// Loaders commit in parallel while loading (default 4): Pebble syncs
	// its log once for the commits that arrive together.
	Loaders int
	// ScanMemory is the full scan's heap budget for its extent arrays
	// (curator.Options.ScanMemoryBytes: 0 the default 1 GiB, -1 no
	// bound); past it they are spilled to mapped files in Dir.
	ScanMemory int64
	// Progress, if set, hears about the load as it goes.
	Progress func(msg string)
	// CPUProfile, if set, receives a CPU profile of the scan and decide
	// (not the load), for `go tool pprof`.
	CPUProfile io.Writer
}

func (o *Options) defaults() {
	if o.Egroups <= 0 {
		o.Egroups = 100_000
	}
	if o.Nodes <= 0 {
		o.Nodes = 10
	}
	if o.Extents <= 0 {
		o.Extents = 4
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Loaders <= 0 {
		o.Loaders = 4
	}
}

// Result is one measured scan.
type Result struct {
	Egroups    int     `json:"egroups"`
	Nodes      int     `json:"nodes"`
	Full       bool    `json:"full"`
	Records    int     `json:"records"` // metadata records the scan read
	LoadSecs   float64 `json:"load_seconds"`
	ScanSecs   float64 `json:"scan_seconds"`
	DecideSecs float64 `json:"decide_seconds"`
	// RecordsPerSec is Records over the scan's wall time; EgroupsPerSec
	// counts egroups only.
	RecordsPerSec float64 `json:"records_per_second"`
	EgroupsPerSec float64 `json:"egroups_per_second"`
	Tasks         int     `json:"tasks"`
	// PeakRSS is the process's peak resident set (VmHWM) during the scan
	// and decide, reset after loading; LoadPeakRSS is the peak while
	// loading (Pebble's memtables and the loader). ScanRSS and ScanHeap
	// are the largest resident set and Go heap (objects, live or not yet
	// swept) sampled every 50 ms during the scan alone; PeakHeap is the
	// largest heap sampled during the scan and decide.
	PeakRSS     uint64 `json:"peak_rss_bytes"`
	LoadPeakRSS uint64 `json:"load_peak_rss_bytes"`
	ScanRSS     uint64 `json:"scan_rss_bytes"`
	ScanHeap    uint64 `json:"scan_heap_bytes"`
	PeakHeap    uint64 `json:"peak_heap_bytes"`
	// ScanAnon is the largest anonymous resident set sampled during the
	// scan: the resident set without the pages of mapped files, which
	// the kernel can write out and drop (a spilled scan's extent arrays).
	ScanAnon uint64 `json:"scan_anon_rss_bytes"`
	// Spilled is how many bytes of extent arrays the scan put in mapped
	// files (Options.ScanMemory).
	Spilled int64 `json:"spilled_bytes"`
	// RSSReset is false when the kernel did not let the peak be reset
	// after loading: PeakRSS then covers the load too.
	RSSReset bool `json:"rss_reset"`
}

// topology is a fixed cluster: every node up, each with an ssd and two
// hdds of ample capacity.
type topology struct{ snap *model.Snapshot }

func (t topology) Snapshot() *model.Snapshot { return t.snap }

func cluster(nodes int) ([]model.Node, []model.Device) {
	var ns []model.Node
	var ds []model.Device
	for i := range nodes {
		n := model.NodeID(fmt.Sprintf("n%d", i+1))
		rack := fmt.Sprintf("r%d", i%3+1)
		ns = append(ns, model.Node{ID: n, Rack: rack, Up: true})
		for _, d := range []struct {
			name string
			tier model.Tier
			cap  int64
		}{{"ssd0", "ssd", 4 << 40}, {"hdd0", "hdd", 64 << 40}, {"hdd1", "hdd", 64 << 40}} {
			ds = append(ds, model.Device{ID: model.DeviceID(string(n) + "/" + d.name), Node: n, Rack: rack, Tier: d.tier, CapacityBytes: d.cap, UsedBytes: d.cap / 4})
		}
	}
	return ns, ds
}

// Run loads the records and measures one scan.
func Run(ctx context.Context, o Options) (Result, error) {
	o.defaults()
	if o.Nodes < 2 || o.Extents > (meta.MaxTxnOps-2)/2 {
		return Result{}, ErrOptions
	}
	dir := o.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "terrace-scansim-")
		if err != nil {
			return Result{}, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	kv, err := meta.OpenPebble(filepath.Join(dir, "meta"))
	if err != nil {
		return Result{}, err
	}
	defer kv.Close()
	nodes, devs := cluster(o.Nodes)
	// The layer needs this node's devices; the scan reads only metadata.
	var local []*device.Device
	for _, d := range devs[:3] {
		dd, err := device.Open(d.ID, device.Spec{Tier: d.Tier, Path: filepath.Join(dir, string(d.ID)), Capacity: d.CapacityBytes})
		if err != nil {
			return Result{}, err
		}
		local = append(local, dd)
	}
	loc := object.NewLocal(devs[0].Node, nodes[0].Rack, local)
	pol, err := placement.New(placement.Config{Name: "fitness"})
	if err != nil {
		return Result{}, err
	}
	l, err := object.New(kv, loc, loc, object.Options{Policy: pol})
	if err != nil {
		return Result{}, err
	}
	defer l.Close()

	res := Result{Egroups: o.Egroups, Nodes: o.Nodes, Full: o.Full}
	start := time.Now()
	if err := load(ctx, kv, o, devs); err != nil {
		return Result{}, err
	}
	res.LoadSecs = time.Since(start).Seconds()
	res.LoadPeakRSS, _ = peakRSS()
	runtime.GC()
	res.RSSReset = resetPeakRSS() == nil

	snap := model.NewSnapshot(time.Now(), nodes, devs).WithSelf(nodes[0].ID)
	// Tiering on, as a server runs the Curator by default.
	c := curator.New(l, kv, topology{snap}, pol, nil, nil, curator.Options{Tiering: true,
		ScanMemoryBytes: o.ScanMemory, ScanSpillDir: dir})
	stop := make(chan struct{})
	samples := make(chan []sample)
	if o.CPUProfile != nil {
		if err := pprof.StartCPUProfile(o.CPUProfile); err != nil {
			return Result{}, fmt.Errorf("scansim: cpu profile: %w", err)
		}
	}
	scanStart := time.Now()
	go sampleMemory(stop, samples)
	t, err := c.TimeScan(ctx, o.Full)
	close(stop)
	if o.CPUProfile != nil {
		pprof.StopCPUProfile()
	}
	for _, m := range <-samples {
		res.PeakHeap = max(res.PeakHeap, m.heap)
		if m.at.Sub(scanStart) <= t.Scan {
			res.ScanHeap, res.ScanRSS = max(res.ScanHeap, m.heap), max(res.ScanRSS, m.rss)
			res.ScanAnon = max(res.ScanAnon, m.anon)
		}
	}
	if err != nil {
		return Result{}, err
	}
	res.PeakRSS, _ = peakRSS()
	res.Records, res.Tasks, res.Spilled = t.Records, t.Tasks, t.Spilled
	res.ScanSecs, res.DecideSecs = t.Scan.Seconds(), t.Decide.Seconds()
	if t.Egroups != o.Egroups {
		return res, fmt.Errorf("scansim: the scan saw %d egroups, %d were loaded", t.Egroups, o.Egroups)
	}
	res.RecordsPerSec = float64(t.Records) / res.ScanSecs
	res.EgroupsPerSec = float64(t.Egroups) / res.ScanSecs
	return res, nil
}

// load writes the synthetic records: egroup IDs 1..N, replicas on
// distinct nodes (vector hdd=2, or ssd=1,hdd=1 for one in four), sizes up
// to 16 MiB, one in a thousand open (its writer on the first replica's
// node) and one in a thousand with a bad replica, an access record for
// three in five; a full scan adds Extents extent records per egroup and
// an object record for each extent but about one in ten.
func load(ctx context.Context, kv meta.KV, o Options, devs []model.Device) error {
	o.defaults()
	perEgroup := 2 // operations per egroup; a transaction holds at most meta.MaxTxnOps
	if o.Full {
		perEgroup += 2 * o.Extents
	}
	now := time.Now().UnixNano()
	type chunk struct{ lo, hi int }
	work := make(chan chunk)
	errc := make(chan error, o.Loaders)
	var wg sync.WaitGroup
	hdd2, mixed := model.MustParseVector("hdd=2"), model.MustParseVector("ssd=1,hdd=1")
	for range o.Loaders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ch := range work {
				var t meta.Txn
				for i := ch.lo; i < ch.hi; i++ {
					id := uint64(i + 1)
					rng := rand.New(rand.NewPCG(o.Seed, id)) // the same records whatever the loaders' order
					eg, a := synthEgroup(rng, now, o.Nodes, devs, hdd2, mixed)
					t.Put(meta.EgroupKey(id), meta.Encode(eg))
					if a != nil {
						t.Put(meta.AccessKey(id), meta.Encode(*a))
					}
					if o.Full {
						// The extents fill the egroup, as appends do; one in ten
						// is referenced by nothing (deleted data), so about a
						// third of the egroups hold dead data.
						xlen := eg.Size / int64(o.Extents)
						for j := range o.Extents {
							xid := id*uint64(o.Extents) + uint64(j)
							t.Put(meta.ExtentKey(xid), meta.Encode(meta.Extent{Egroup: id, Off: int64(j) * xlen, Len: xlen, Ctime: eg.Mtime}))
							if rng.IntN(10) > 0 {
								t.Put(meta.ObjectKey(fmt.Sprintf("b%d", id%8), fmt.Sprintf("k%016x", xid)),
									meta.Encode(meta.Object{Size: xlen, ETag: "x", Vector: eg.Vector, Extents: []meta.ExtentRef{{ID: xid, Len: xlen}}}))
							}
						}
					}
					if len(t.Ops)+perEgroup > meta.MaxTxnOps || i == ch.hi-1 {
						if _, err := kv.Commit(ctx, &t); err != nil {
							errc <- err
							return
						}
						t = meta.Txn{}
					}
				}
			}
		}()
	}
	const step = 1000 // egroups per chunk of work
	var err error
	lastReport := time.Now()
	for lo := 0; lo < o.Egroups && err == nil; lo += step {
		select {
		case work <- chunk{lo, min(lo+step, o.Egroups)}:
		case err = <-errc:
		case <-ctx.Done():
			err = ctx.Err()
		}
		if o.Progress != nil && time.Since(lastReport) > 10*time.Second {
			lastReport = time.Now()
			o.Progress(fmt.Sprintf("loaded %d of %d egroups", lo, o.Egroups))
		}
	}
	close(work)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errc:
		default:
		}
	}
	return err
}

// synthEgroup draws one egroup record and its access record (nil: never
// read).
func synthEgroup(rng *rand.Rand, now int64, nodes int, devs []model.Device, hdd2, mixed model.Vector) (meta.Egroup, *meta.Access) {
	eg := meta.Egroup{State: meta.EgroupSealed, Size: 1<<20 + rng.Int64N(15<<20), Vector: hdd2,
		Mtime: now - rng.Int64N(int64(30*24*time.Hour))}
	// Device i of a node: 0 ssd0, 1 hdd0, 2 hdd1.
	on := []int{1 + rng.IntN(2), 1 + rng.IntN(2)}
	if rng.IntN(4) == 0 {
		eg.Vector, on[0] = mixed, 0
	}
	first := rng.IntN(nodes)
	second := (first + 1 + rng.IntN(nodes-1)) % nodes
	for i, n := range []int{first, second} {
		d := devs[n*3+on[i]]
		eg.Replicas = append(eg.Replicas, meta.EgroupReplica{Device: d.ID, Node: d.Node, Tier: d.Tier})
	}
	switch rng.IntN(1000) {
	case 0:
		eg.State, eg.Writer = meta.EgroupOpen, eg.Replicas[0].Node
	case 1:
		eg.Replicas[1].Bad = true
	}
	if rng.IntN(5) < 3 {
		at := eg.Mtime + rng.Int64N(now-eg.Mtime+1)
		r := rng.Int64N(50)
		return eg, &meta.Access{Atime: at, Reads: r * 3, WinStart: at - int64(time.Hour), WinReads: r}
	}
	return eg, nil
}

// peakRSS is the process's peak resident set so far (VmHWM).
func peakRSS() (uint64, error) {
	p, err := procfs.Self()
	if err != nil {
		return 0, err
	}
	s, err := p.NewStatus()
	if err != nil {
		return 0, err
	}
	return s.VmHWM, nil
}

// resetPeakRSS resets VmHWM to the current resident set (Linux: writing 5
// to /proc/self/clear_refs).
func resetPeakRSS() error {
	err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
	if err != nil {
		return fmt.Errorf("scansim: reset peak RSS: %w", err)
	}
	return nil
}

// sample is the Go heap and the resident set at one time.
type sample struct {
	at              time.Time
	heap, rss, anon uint64
}

// sampleMemory samples the Go heap's objects (live or not yet swept) and
// the resident set every 50 ms until stop closes, then sends the samples.
func sampleMemory(stop <-chan struct{}, out chan<- []sample) {
	ms := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var got []sample
	p, perr := procfs.Self()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		m := sample{at: time.Now()}
		metrics.Read(ms)
		if ms[0].Value.Kind() == metrics.KindUint64 {
			m.heap = ms[0].Value.Uint64()
		}
		if perr == nil {
			if st, err := p.NewStatus(); err == nil {
				m.rss, m.anon = st.VmRSS, st.RssAnon
			}
		}
		got = append(got, m)
		select {
		case <-stop:
			out <- got
			return
		case <-t.C:
		}
	}
}

// ErrOptions is returned for options out of range.
var ErrOptions = errors.New("scansim: want at least two nodes and 1 to 63 extents per egroup")
