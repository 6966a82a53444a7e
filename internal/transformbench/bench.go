package transformbench

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/terrace-storage/terrace/internal/curator"
	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/device"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/placement"
)

// Options configure a run. Zero values mean defaults.
type Options struct {
	Dir string // scratch directory (required)
	// LogicalBytes is the size of the data set (default 96 MiB), a third
	// each of logs, media and VM-image blocks.
	LogicalBytes int64
	Seed         uint64
	// Reads is the number of whole-object GETs per class and phase for the
	// latency percentiles (default 200).
	Reads int
	// Devices is the number of hdd devices (default 6).
	Devices int
	Vector  string // default hdd=2
	// Profile is the device emulation profile ("" none: page-cache speed;
	// "hdd": 150 MB/s and 4 ms per operation, serialised).
	Profile string
}

func (o *Options) ensureDefaults() {
	if o.LogicalBytes == 0 {
		o.LogicalBytes = 96 << 20
	}
	if o.Reads == 0 {
		o.Reads = 200
	}
	if o.Devices == 0 {
		o.Devices = 6
	}
	if o.Vector == "" {
		o.Vector = "hdd=2"
	}
}

// Row is one measurement.
type Row struct {
	Phase  string  // plain, compressed, truncated
	Class  string  // logs, media, vm, all
	Metric string  // physical_bytes, logical_bytes, get_p50_ms, ...
	Value  float64 //
}

// Result is a run's measurements and a summary.
type Result struct {
	Rows    []Row
	Summary []string
}

// Classes of the data set.
var classes = []string{"logs", "media", "vm"}

// Run executes the scenario.
func Run(ctx context.Context, o Options, progress func(string)) (*Result, error) {
	o.ensureDefaults()
	if progress == nil {
		progress = func(string) {}
	}
	vec, err := model.ParseVector(o.Vector)
	if err != nil {
		return nil, err
	}
	var devs []*device.Device
	for i := 0; i < o.Devices; i++ {
		d, err := device.Open(model.DeviceID(fmt.Sprintf("n1/hdd%d", i)), device.Spec{Tier: model.TierHDD, Path: filepath.Join(o.Dir, fmt.Sprintf("hdd%d", i)), Capacity: 64 << 30, Profile: o.Profile})
		if err != nil {
			return nil, err
		}
		if o.Profile == "" {
			d.SetThroughput(200e6, 200e6)
		}
		devs = append(devs, d)
	}
	kv, err := meta.OpenPebble(filepath.Join(o.Dir, "meta"))
	if err != nil {
		return nil, err
	}
	defer kv.Close()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	local := object.NewLocal("n1", "r1", devs)
	pol, _ := placement.New(placement.Config{Name: "moop"})
	l, err := object.New(kv, local, local, object.Options{Policy: pol, Logger: quiet, StatsInterval: time.Second})
	if err != nil {
		return nil, err
	}
	defer l.Close()
	c := curator.New(l, kv, local, pol, nil, nil, curator.Options{
		Decide: decide.Options{GarbageGrace: time.Nanosecond, Transform: decide.TransformOptions{TruncateMinBytes: 4096, HotReads: 1 << 40}},
		Scrub:  false, MoveBytesPerSec: 1e12, SealIdleBeforeScan: -1, Logger: quiet, JobTimeLimit: time.Hour,
	})
	if err := l.CreateBucket(ctx, "mixed", "", vec); err != nil {
		return nil, err
	}
	if err := l.SetBucketTransform(ctx, "mixed", meta.BucketTransform{Compress: "zstd", ColdAfter: 1}); err != nil {
		return nil, err
	}
	res := &Result{}
	add := func(phase, class, metric string, v float64) {
		res.Rows = append(res.Rows, Row{phase, class, metric, v})
	}

	// Write the data set.
	progress("writing the data set")
	r := rand.New(rand.NewPCG(o.Seed, 1))
	keys := map[string][]string{}
	sizes := map[string]int64{}
	var written int64
	for i := 0; written < o.LogicalBytes; i++ {
		class := classes[i%3]
		size := 64<<10 + r.IntN(2<<20)
		key := fmt.Sprintf("%s/%05d", class, i)
		b := Content(o.Seed, class, key, size)
		if _, err := l.Put(ctx, "mixed", key, bytes.NewReader(b), object.PutOptions{Size: int64(len(b))}); err != nil {
			return nil, err
		}
		keys[class] = append(keys[class], key)
		sizes[class] += int64(len(b))
		written += int64(len(b))
	}
	if _, err := l.SealIdle(ctx, 0); err != nil {
		return nil, err
	}
	measure := func(phase string) error {
		phys, logical, err := physical(ctx, kv)
		if err != nil {
			return err
		}
		add(phase, "all", "physical_bytes", float64(phys))
		add(phase, "all", "logical_bytes", float64(logical))
		for _, class := range classes {
			progress(fmt.Sprintf("%s: reading %s", phase, class))
			lat, bytesRead, err := readLatency(ctx, l, o.Seed, class, keys[class], o.Reads, r)
			if err != nil {
				return err
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			var total time.Duration
			for _, d := range lat {
				total += d
			}
			add(phase, class, "get_p50_ms", ms(lat[len(lat)/2]))
			add(phase, class, "get_p99_ms", ms(lat[(len(lat)*99)/100]))
			add(phase, class, "get_MBps", float64(bytesRead)/total.Seconds()/1e6)
		}
		return nil
	}
	if err := measure("plain"); err != nil {
		return nil, err
	}
	for _, class := range classes {
		add("plain", class, "logical_bytes", float64(sizes[class]))
	}

	// Compress: one full job, then one that removes the emptied sources.
	progress("compressing")
	start := time.Now()
	rec, err := c.RunJob(ctx, "full", "bench")
	if err != nil {
		return nil, err
	}
	took := time.Since(start)
	tb := rec.Transformed["compress"]
	add("compressed", "all", "compress_tasks", float64(rec.Done["compress"]))
	add("compressed", "all", "compress_logical_bytes", float64(tb.Logical))
	add("compressed", "all", "compress_stored_bytes", float64(tb.Stored))
	add("compressed", "all", "compress_job_seconds", took.Seconds())
	add("compressed", "all", "compress_MBps", float64(tb.Logical)/took.Seconds()/1e6)
	if _, err := c.RunJob(ctx, "full", "bench"); err != nil {
		return nil, err
	}
	l.FlushAccess(ctx)
	if err := measure("compressed"); err != nil {
		return nil, err
	}

	// Truncate: delete the object at the tail of each egroup (its last
	// extent), leaving a dead tail too small for compaction's cost-benefit
	// rule; data removal drops the extent records and truncation the bytes.
	progress("deleting egroup tails and truncating")
	type tailObj struct {
		key, class string
		off        int64
	}
	tails := map[uint64]tailObj{}
	for _, class := range classes {
		for _, k := range keys[class] {
			loc, err := l.Locate(ctx, "mixed", k)
			if err != nil {
				return nil, err
			}
			x := loc.Extents[len(loc.Extents)-1]
			if loc.Extents[0].Egroup != x.Egroup {
				continue // spans egroups: not a pure tail
			}
			if cur, ok := tails[x.Egroup]; !ok || x.EgroupOff > cur.off {
				tails[x.Egroup] = tailObj{k, class, x.EgroupOff}
			}
		}
	}
	deleted := map[string]bool{}
	for _, tobj := range tails {
		if err := l.Delete(ctx, "mixed", tobj.key); err != nil {
			return nil, err
		}
		deleted[tobj.key] = true
	}
	for _, class := range classes {
		var keep []string
		for _, k := range keys[class] {
			if !deleted[k] {
				keep = append(keep, k)
			}
		}
		keys[class] = keep
	}
	add("truncated", "all", "deleted_objects", float64(len(deleted)))
	physBefore, _, _ := physical(ctx, kv)
	var truncTook time.Duration
	var truncated int
	var freed, copied int64
	for i := 0; i < 3; i++ {
		start := time.Now()
		rec, err := c.RunJob(ctx, "full", "bench")
		if err != nil {
			return nil, err
		}
		if rec.Done["truncate"] > 0 {
			truncTook += time.Since(start)
			truncated += rec.Done["truncate"]
		}
		freed += rec.Freed
		copied += rec.Moved
	}
	add("truncated", "all", "copied_bytes", float64(copied))
	add("truncated", "all", "truncate_tasks", float64(truncated))
	add("truncated", "all", "physical_bytes_before", float64(physBefore))
	add("truncated", "all", "freed_bytes", float64(freed))
	add("truncated", "all", "truncate_job_seconds", truncTook.Seconds())
	phys, logical, err := physical(ctx, kv)
	if err != nil {
		return nil, err
	}
	add("truncated", "all", "physical_bytes", float64(phys))
	add("truncated", "all", "logical_bytes", float64(logical))
	// Every surviving object still reads back byte-identical.
	for _, class := range classes {
		for _, k := range keys[class] {
			if err := verify(ctx, l, o.Seed, class, k); err != nil {
				return nil, err
			}
		}
	}
	if err := runDedup(ctx, l, kv, c, o, add, progress); err != nil {
		return nil, err
	}
	if err := runEC(ctx, l, kv, c, o, add, progress, devs); err != nil {
		return nil, err
	}
	res.Summary = summary(res.Rows)
	return res, nil
}

// runEC measures erasure coding: a cold any=3 bucket of media set to
// 4+2, physical bytes before and after, the encode job's throughput, and
// GET latency from replicas, from intact stripes and from stripes with a
// failed device (degraded reads reconstruct). It runs last: it fails a
// device.
func runEC(ctx context.Context, l *object.Layer, kv meta.KV, c *curator.Curator, o Options, add func(phase, class, metric string, v float64), progress func(string), devs []*device.Device) error {
	if len(devs) < 6 {
		return nil
	}
	progress("erasure coding: writing")
	p0, _, err := physical(ctx, kv)
	if err != nil {
		return err
	}
	if err := l.CreateBucket(ctx, "archive", "", model.MustParseVector("any=3")); err != nil {
		return err
	}
	var keys []string
	var written int64
	r := rand.New(rand.NewPCG(o.Seed, 9))
	for i := 0; written < o.LogicalBytes/3; i++ {
		k := fmt.Sprintf("archive/%05d", i)
		b := Content(o.Seed, "media", k, 64<<10+r.IntN(2<<20))
		if _, err := l.Put(ctx, "archive", k, bytes.NewReader(b), object.PutOptions{Size: int64(len(b))}); err != nil {
			return err
		}
		keys = append(keys, k)
		written += int64(len(b))
	}
	if _, err := l.SealIdle(ctx, 0); err != nil {
		return err
	}
	// The archive's share of the physical bytes (the mixed bucket's
	// data is done transforming and stays as it is).
	ecBytes := func() (int64, error) {
		phys, _, err := physical(ctx, kv)
		return phys - p0, err
	}
	before, err := ecBytes()
	if err != nil {
		return err
	}
	add("ec", "archive", "logical_bytes", float64(written))
	add("ec", "archive", "physical_bytes_replicas", float64(before))
	lat := func(phase string) error {
		progress("erasure coding: reading (" + phase + ")")
		ls, n, err := readLatency(ctx, l, o.Seed, "media", keys, o.Reads, r, "archive")
		if err != nil {
			return err
		}
		sort.Slice(ls, func(i, j int) bool { return ls[i] < ls[j] })
		var total time.Duration
		for _, d := range ls {
			total += d
		}
		add(phase, "archive", "get_p50_ms", ms(ls[len(ls)/2]))
		add(phase, "archive", "get_p99_ms", ms(ls[(len(ls)*99)/100]))
		add(phase, "archive", "get_MBps", float64(n)/total.Seconds()/1e6)
		return nil
	}
	if err := lat("ec-replicas"); err != nil {
		return err
	}
	if err := l.SetBucketTransform(ctx, "archive", meta.BucketTransform{EC: "4+2", ColdAfter: 1}); err != nil {
		return err
	}
	progress("erasure coding: encoding")
	start := time.Now()
	rec, err := c.RunJob(ctx, "full", "bench")
	if err != nil {
		return err
	}
	took := time.Since(start)
	tb := rec.Transformed["ec-encode"]
	add("ec", "archive", "encode_tasks", float64(rec.Done["ec-encode"]))
	add("ec", "archive", "encode_job_seconds", took.Seconds())
	add("ec", "archive", "encode_MBps", float64(tb.Logical)/took.Seconds()/1e6)
	if _, err := c.RunJob(ctx, "full", "bench"); err != nil {
		return err
	}
	after, err := ecBytes()
	if err != nil {
		return err
	}
	add("ec", "archive", "physical_bytes_stripes", float64(after))
	if err := lat("ec-intact"); err != nil {
		return err
	}
	devs[0].MarkFailed()
	if err := lat("ec-degraded"); err != nil {
		return err
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// physical sums committed bytes over all replicas, and what they would
// be without compression.
func physical(ctx context.Context, kv meta.KV) (phys, logical int64, err error) {
	p := []byte(meta.PrefixEgroup)
	items, err := kv.Scan(ctx, p, meta.PrefixEnd(p), 0)
	if err != nil {
		return 0, 0, err
	}
	for _, it := range items {
		var eg meta.Egroup
		if err := meta.Decode(it.Value, &eg); err != nil {
			return 0, 0, err
		}
		n := int64(len(eg.Replicas))
		phys += object.FileSize(eg) * n
		if eg.Codec != "" && eg.Logical > 0 {
			logical += eg.Logical * n
		} else {
			logical += eg.Size * n
		}
	}
	return phys, logical, nil
}

func readLatency(ctx context.Context, l *object.Layer, seed uint64, class string, keys []string, n int, r *rand.Rand, bucket ...string) ([]time.Duration, int64, error) {
	b := "mixed"
	if len(bucket) > 0 {
		b = bucket[0]
	}
	var lat []time.Duration
	var total int64
	for i := 0; i < n; i++ {
		k := keys[r.IntN(len(keys))]
		start := time.Now()
		_, rc, err := l.Get(ctx, b, k, 0, -1)
		if err != nil {
			return nil, 0, err
		}
		body, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, 0, err
		}
		lat = append(lat, time.Since(start))
		total += int64(len(body))
		if !bytes.Equal(body, Content(seed, class, k, len(body))) {
			return nil, 0, fmt.Errorf("transformbench: %s read back different bytes", k)
		}
	}
	return lat, total, nil
}

func verify(ctx context.Context, l *object.Layer, seed uint64, class, k string) error {
	_, rc, err := l.Get(ctx, "mixed", k, 0, -1)
	if err != nil {
		return err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	if !bytes.Equal(b, Content(seed, class, k, len(b))) {
		return fmt.Errorf("transformbench: %s read back different bytes", k)
	}
	return nil
}

// Content is the deterministic content of an object of a class: JSON log
// lines (compressible), random bytes (already-compressed media), or 4 KiB
// blocks of a VM image (a third zero, a third from a small pool of
// repeated blocks, a third random).
func Content(seed uint64, class, key string, size int) []byte {
	h := uint64(0)
	for _, c := range key {
		h = h*131 + uint64(c)
	}
	r := rand.New(rand.NewPCG(seed, h))
	b := make([]byte, 0, size+256)
	switch class {
	case "logs":
		buf := bytes.NewBuffer(b)
		for i := 0; buf.Len() < size; i++ {
			fmt.Fprintf(buf, `{"ts":%d,"host":"web-%d","level":"%s","method":"GET","path":"/api/v2/items/%d","status":%d,"bytes":%d,"ms":%d}`+"\n",
				1700000000+i*7, r.IntN(40), []string{"info", "info", "warn", "error"}[r.IntN(4)], r.IntN(1e6), []int{200, 200, 304, 404, 500}[r.IntN(5)], r.IntN(1e5), r.IntN(2000))
		}
		return buf.Bytes()[:size]
	case "vm":
		pool := rand.New(rand.NewPCG(seed, 77))
		blocks := make([][]byte, 16)
		for i := range blocks {
			blocks[i] = make([]byte, 4096)
			for j := range blocks[i] {
				blocks[i][j] = byte(pool.Uint32())
			}
		}
		for len(b) < size {
			switch r.IntN(3) {
			case 0:
				b = append(b, make([]byte, 4096)...)
			case 1:
				b = append(b, blocks[r.IntN(len(blocks))]...)
			default:
				for j := 0; j < 4096; j += 8 {
					v := r.Uint64()
					b = append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24), byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56))
				}
			}
		}
		return b[:size]
	}
	b = b[:size]
	for i := 0; i+8 <= size; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

// WriteCSV writes the rows as phase,class,metric,value.
func (r *Result) WriteCSV(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"phase", "class", "metric", "value"})
	for _, row := range r.Rows {
		w.Write([]string{row.Phase, row.Class, row.Metric, strconv.FormatFloat(row.Value, 'f', -1, 64)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func summary(rows []Row) []string {
	get := func(phase, class, metric string) float64 {
		for _, r := range rows {
			if r.Phase == phase && r.Class == class && r.Metric == metric {
				return r.Value
			}
		}
		return 0
	}
	mib := func(v float64) string { return fmt.Sprintf("%.1f MiB", v/(1<<20)) }
	var out []string
	pp, pl := get("plain", "all", "physical_bytes"), get("plain", "all", "logical_bytes")
	cp := get("compressed", "all", "physical_bytes")
	if dl := get("dedup", "images", "logical_bytes"); dl > 0 {
		out = append(out, fmt.Sprintf("dedup (VM images of 4 MiB blocks from a pool of 6): %s logical; %s → %s physical over both replicas after GC (%.0f tasks, %s shared, job %.2fs)",
			mib(dl), mib(get("dedup", "images", "physical_bytes_before")), mib(get("dedup", "images", "physical_bytes_after")),
			get("dedup", "images", "dedup_tasks"), mib(get("dedup", "images", "dedup_shared_bytes")), get("dedup", "images", "dedup_job_seconds")))
	}
	if rl := get("ec", "archive", "logical_bytes"); rl > 0 {
		out = append(out, fmt.Sprintf("erasure coding (media, any=3 → 4+2): %s logical; %s as replicas (%.2fx) → %s as stripes (%.2fx); encode %.0f tasks in %.2fs (%.0f MB/s)",
			mib(rl), mib(get("ec", "archive", "physical_bytes_replicas")), get("ec", "archive", "physical_bytes_replicas")/rl,
			mib(get("ec", "archive", "physical_bytes_stripes")), get("ec", "archive", "physical_bytes_stripes")/rl,
			get("ec", "archive", "encode_tasks"), get("ec", "archive", "encode_job_seconds"), get("ec", "archive", "encode_MBps")))
		for _, ph := range []string{"ec-replicas", "ec-intact", "ec-degraded"} {
			out = append(out, fmt.Sprintf("GET archive %-11s p50 %.2f ms, p99 %.2f ms, %.0f MB/s", ph, get(ph, "archive", "get_p50_ms"), get(ph, "archive", "get_p99_ms"), get(ph, "archive", "get_MBps")))
		}
	}
	out = append(out, fmt.Sprintf("data set: logs %s, media %s, vm %s (logical, one copy)", mib(get("plain", "logs", "logical_bytes")),
		mib(get("plain", "media", "logical_bytes")), mib(get("plain", "vm", "logical_bytes"))))
	out = append(out, fmt.Sprintf("physical (all replicas): plain %s → compressed %s (%.2fx of logical %s)", mib(pp), mib(cp), cp/pl, mib(pl)))
	out = append(out, fmt.Sprintf("compression: %.0f tasks, %s → %s in %.2fs (%.0f MB/s of logical data)",
		get("compressed", "all", "compress_tasks"), mib(get("compressed", "all", "compress_logical_bytes")),
		mib(get("compressed", "all", "compress_stored_bytes")), get("compressed", "all", "compress_job_seconds"), get("compressed", "all", "compress_MBps")))
	out = append(out, fmt.Sprintf("truncation after deleting each egroup's tail object (%.0f objects): %.0f tasks freed %s of %s (copying %s) in %.3fs; physical now %s",
		get("truncated", "all", "deleted_objects"), get("truncated", "all", "truncate_tasks"), mib(get("truncated", "all", "freed_bytes")),
		mib(get("truncated", "all", "physical_bytes_before")), mib(get("truncated", "all", "copied_bytes")),
		get("truncated", "all", "truncate_job_seconds"), mib(get("truncated", "all", "physical_bytes"))))
	for _, class := range classes {
		out = append(out, fmt.Sprintf("GET %-5s p50 %.2f → %.2f ms, p99 %.2f → %.2f ms, %.0f → %.0f MB/s", class,
			get("plain", class, "get_p50_ms"), get("compressed", class, "get_p50_ms"),
			get("plain", class, "get_p99_ms"), get("compressed", class, "get_p99_ms"),
			get("plain", class, "get_MBps"), get("compressed", class, "get_MBps")))
	}
	return out
}

// runDedup measures deduplication: VM images built from 4 MiB blocks (the
// extent size) drawn from a small pool, in a bucket with dedup on;
// physical bytes before, after the dedup job, and after GC reclaimed the
// duplicates' copies.
func runDedup(ctx context.Context, l *object.Layer, kv meta.KV, c *curator.Curator, o Options, add func(phase, class, metric string, v float64), progress func(string)) error {
	progress("dedup: writing VM images")
	p0, _, err := physical(ctx, kv)
	if err != nil {
		return err
	}
	if err := l.CreateBucket(ctx, "images", "", model.Vector{}); err != nil {
		return err
	}
	if err := l.SetBucketTransform(ctx, "images", meta.BucketTransform{Dedup: true}); err != nil {
		return err
	}
	const block = 4 << 20
	pool := make([][]byte, 6)
	for i := range pool {
		pool[i] = Content(o.Seed, "media", fmt.Sprintf("block-%d", i), block)
	}
	r := rand.New(rand.NewPCG(o.Seed, 11))
	var written int64
	images := map[string][]int{}
	for i := 0; written < o.LogicalBytes/3; i++ {
		k := fmt.Sprintf("images/vm-%03d.img", i)
		var blocks []int
		var img []byte
		for j := 0; j < 4; j++ {
			b := r.IntN(len(pool))
			blocks = append(blocks, b)
			img = append(img, pool[b]...)
		}
		start := time.Now()
		if _, err := l.Put(ctx, "images", k, bytes.NewReader(img), object.PutOptions{Size: int64(len(img))}); err != nil {
			return err
		}
		add("dedup", "images", "put_ms", ms(time.Since(start)))
		images[k] = blocks
		written += int64(len(img))
	}
	if _, err := l.SealIdle(ctx, 0); err != nil {
		return err
	}
	p1, _, err := physical(ctx, kv)
	if err != nil {
		return err
	}
	add("dedup", "images", "logical_bytes", float64(written))
	add("dedup", "images", "physical_bytes_before", float64(p1-p0))
	progress("dedup: deduplicating")
	start := time.Now()
	rec, err := c.RunJob(ctx, "full", "bench")
	if err != nil {
		return err
	}
	add("dedup", "images", "dedup_tasks", float64(rec.Done["dedup"]))
	add("dedup", "images", "dedup_job_seconds", time.Since(start).Seconds())
	add("dedup", "images", "dedup_shared_bytes", float64(rec.Transformed["dedup"].Logical))
	for i := 0; i < 3; i++ { // GC: compaction and removal of the duplicates' copies
		if _, err := c.RunJob(ctx, "full", "bench"); err != nil {
			return err
		}
	}
	p2, _, err := physical(ctx, kv)
	if err != nil {
		return err
	}
	add("dedup", "images", "physical_bytes_after", float64(p2-p0))
	for k, blocks := range images {
		_, rc, err := l.Get(ctx, "images", k, 0, -1)
		if err != nil {
			return err
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return err
		}
		for j, b := range blocks {
			if !bytes.Equal(got[j*block:(j+1)*block], pool[b]) {
				return fmt.Errorf("transformbench: %s block %d read back different bytes after dedup", k, j)
			}
		}
	}
	return nil
}
