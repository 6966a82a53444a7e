package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"
	"unsafe"
)

// DeviceOptions control the device baseline. Zero fields take defaults.
type DeviceOptions struct {
	// Engine is "auto" (fio when on PATH, else built-in), "fio" or "builtin".
	Engine string
	// Runtime is the length of each of the five tests. Default 2s, so the
	// whole baseline takes about 10 s.
	Runtime time.Duration
	// FileBytes is the size of the test file. Default 256MiB: larger than
	// any device write cache worth mentioning, small enough to lay out in a
	// second or two. Sequential tests wrap around it.
	FileBytes int64
	// QueueDepth is the number of I/Os in flight for the throughput and
	// random tests (the fsync test is serial by definition). Default 16.
	QueueDepth int
	// Buffered uses the page cache instead of O_DIRECT. Direct I/O is the
	// default because cached reads measure memory, not the device; it is
	// turned off automatically where the filesystem refuses it (tmpfs).
	Buffered bool
	// Keep leaves the test files in place.
	Keep bool
}

// Device test limits.
const (
	MaxDeviceRuntime   = 10 * time.Minute
	MaxDeviceFileBytes = 64 * GiB
	MaxQueueDepth      = 256
)

// EnsureDefaults fills zero fields.
func (o *DeviceOptions) EnsureDefaults() {
	if o.Engine == "" {
		o.Engine = "auto"
	}
	if o.Runtime == 0 {
		o.Runtime = 2 * time.Second
	}
	if o.FileBytes == 0 {
		o.FileBytes = 256 * MiB
	}
	if o.QueueDepth == 0 {
		o.QueueDepth = 16
	}
}

// Validate rejects bad options.
func (o *DeviceOptions) Validate() error {
	switch {
	case o.Engine != "auto" && o.Engine != "fio" && o.Engine != "builtin":
		return fmt.Errorf("bench: device engine %q: want auto, fio or builtin", o.Engine)
	case o.Runtime <= 0 || o.Runtime > MaxDeviceRuntime:
		return fmt.Errorf("bench: device runtime %s out of range (0, %s]", o.Runtime, MaxDeviceRuntime)
	case o.FileBytes < 4*MiB || o.FileBytes > MaxDeviceFileBytes:
		return fmt.Errorf("bench: device file size %s out of range [4MiB, %s]", FormatBytes(o.FileBytes), FormatBytes(MaxDeviceFileBytes))
	case o.FileBytes%MiB != 0:
		return fmt.Errorf("bench: device file size %s must be a whole number of MiB", FormatBytes(o.FileBytes))
	case o.QueueDepth < 1 || o.QueueDepth > MaxQueueDepth:
		return fmt.Errorf("bench: queue depth %d out of range [1, %d]", o.QueueDepth, MaxQueueDepth)
	}
	return nil
}

// DeviceTest is one measurement.
type DeviceTest struct {
	Name       string  `json:"name"`
	BlockBytes int64   `json:"block_bytes"`
	QueueDepth int     `json:"queue_depth"`
	MBPerSec   float64 `json:"mb_per_sec"`
	IOPS       float64 `json:"iops"`
	// Latency of one I/O (for the fsync test: of one fsync).
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
}

// Device test names.
const (
	DevSeqWrite  = "seq-write"
	DevSeqRead   = "seq-read"
	DevRandRead  = "rand-read"
	DevRandWrite = "rand-write"
	DevFsync     = "fsync"
)

// DeviceResult is the baseline of one directory's device.
type DeviceResult struct {
	Dir            string       `json:"dir"`
	Engine         string       `json:"engine"` // "fio-3.33" or "builtin"
	Direct         bool         `json:"direct"`
	FileBytes      int64        `json:"file_bytes"`
	RuntimeSeconds float64      `json:"runtime_seconds"` // per test
	Tests          []DeviceTest `json:"tests"`
	Notes          []string     `json:"notes,omitempty"`
}

// Test returns the named test, or a zero DeviceTest.
func (r *DeviceResult) Test(name string) DeviceTest {
	for _, t := range r.Tests {
		if t.Name == name {
			return t
		}
	}
	return DeviceTest{}
}

// MeasureDevice measures the device holding dir: sequential write and read
// throughput (1 MiB blocks), random 4 KiB read and write IOPS, and the rate
// of serial 4 KiB write+fsync pairs, the ceiling for a writer that syncs
// each acknowledgement alone (group commit is how durable small writes beat
// it). It writes FileBytes (plus 16 MiB) of test files in dir and removes
// them afterwards.
func MeasureDevice(ctx context.Context, dir string, opts DeviceOptions) (*DeviceResult, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("bench: device: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("bench: device: %s is not a directory", dir)
	}
	res := &DeviceResult{Dir: dir, FileBytes: opts.FileBytes, RuntimeSeconds: opts.Runtime.Seconds(), Direct: !opts.Buffered}
	if res.Direct && !directIOWorks(dir) {
		res.Direct = false
		res.Notes = append(res.Notes, "O_DIRECT refused by this filesystem; measured through the page cache")
	}
	engine := opts.Engine
	fioPath, lookErr := exec.LookPath("fio")
	if engine == "auto" {
		engine = "builtin"
		if lookErr == nil {
			engine = "fio"
		}
	}
	if engine == "fio" && lookErr != nil {
		return nil, errors.New("bench: device: fio not found on PATH (install it, or use --engine builtin)")
	}
	if engine == "fio" {
		err = runFio(ctx, fioPath, dir, opts, res)
	} else {
		res.Engine = "builtin"
		err = runBuiltinDevice(ctx, dir, opts, res)
	}
	return res, err
}

// directIOWorks reports whether dir's filesystem accepts O_DIRECT.
func directIOWorks(dir string) bool {
	f, err := os.CreateTemp(dir, ".terrace-bench-odirect-*")
	if err != nil {
		return false
	}
	name := f.Name()
	f.Close()
	defer os.Remove(name)
	g, err := os.OpenFile(name, os.O_RDWR|syscall.O_DIRECT, 0)
	if err != nil {
		return false
	}
	defer g.Close()
	buf := alignedBuf(4096)
	_, err = g.WriteAt(buf, 0)
	return err == nil
}

// fioJob describes one fio invocation.
type fioJob struct {
	name  string
	args  []string
	bs    int64
	depth int
}

func fioJobs(opts DeviceOptions, direct bool) []fioJob {
	d := "--direct=0"
	if direct {
		d = "--direct=1"
	}
	qd := strconv.Itoa(opts.QueueDepth)
	aio := []string{"--ioengine=libaio", "--iodepth=" + qd, d}
	return []fioJob{
		{DevSeqWrite, append([]string{"--rw=write", "--bs=1M", "--end_fsync=1"}, aio...), MiB, opts.QueueDepth},
		{DevSeqRead, append([]string{"--rw=read", "--bs=1M"}, aio...), MiB, opts.QueueDepth},
		{DevRandRead, append([]string{"--rw=randread", "--bs=4k"}, aio...), 4 * KiB, opts.QueueDepth},
		{DevRandWrite, append([]string{"--rw=randwrite", "--bs=4k"}, aio...), 4 * KiB, opts.QueueDepth},
		// Serial buffered 4 KiB writes, each followed by fsync(2).
		{DevFsync, []string{"--rw=write", "--bs=4k", "--ioengine=sync", "--fsync=1", "--direct=0", "--size=16M", "--filename=terrace-bench-fsync.dat"}, 4 * KiB, 1},
	}
}

func runFio(ctx context.Context, fio, dir string, opts DeviceOptions, res *DeviceResult) error {
	defer func() {
		if !opts.Keep {
			os.Remove(filepath.Join(dir, "terrace-bench-fio.dat"))
			os.Remove(filepath.Join(dir, "terrace-bench-fsync.dat"))
		}
	}()
	for _, j := range fioJobs(opts, res.Direct) {
		args := []string{
			"--name=" + j.name, "--directory=" + dir, "--filename=terrace-bench-fio.dat",
			"--size=" + strconv.FormatInt(opts.FileBytes, 10),
			"--runtime=" + strconv.FormatFloat(opts.Runtime.Seconds(), 'f', -1, 64), "--time_based",
			"--output-format=json",
		}
		args = append(args, j.args...) // later flags override (fsync's --size, --filename)
		cmd := exec.CommandContext(ctx, fio, args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("bench: device: fio %s: %v: %s", j.name, err, strings.TrimSpace(stderr.String()))
		}
		t, version, err := parseFioJSON(stdout.Bytes(), j.name)
		if err != nil {
			return err
		}
		t.BlockBytes, t.QueueDepth = j.bs, j.depth
		res.Engine = version
		res.Tests = append(res.Tests, t)
	}
	return nil
}

// fioOutput is the part of fio's JSON output (fio ≥ 3.0) that is used.
type fioOutput struct {
	Version string `json:"fio version"`
	Jobs    []struct {
		JobName string     `json:"jobname"`
		Error   int        `json:"error"`
		Read    fioIOStats `json:"read"`
		Write   fioIOStats `json:"write"`
		Sync    struct {
			TotalIOs int64      `json:"total_ios"`
			Lat      fioLatency `json:"lat_ns"`
		} `json:"sync"`
		RuntimeMs int64 `json:"job_runtime"`
	} `json:"jobs"`
}

type fioIOStats struct {
	IOBytes  int64      `json:"io_bytes"`
	BwBytes  float64    `json:"bw_bytes"`
	IOPS     float64    `json:"iops"`
	TotalIOs int64      `json:"total_ios"`
	Clat     fioLatency `json:"clat_ns"`
}

type fioLatency struct {
	N          int64              `json:"N"`
	Mean       float64            `json:"mean"`
	Percentile map[string]float64 `json:"percentile"`
}

func (l fioLatency) pctMs(p string) float64 { return l.Percentile[p] / 1e6 }

// parseFioJSON reads one job's result from fio's JSON output. fio may print
// warnings before the JSON document; they are skipped.
func parseFioJSON(out []byte, test string) (DeviceTest, string, error) {
	t := DeviceTest{Name: test}
	i := bytes.IndexByte(out, '{')
	if i < 0 {
		return t, "", fmt.Errorf("bench: device: fio %s: no JSON in output", test)
	}
	var fo fioOutput
	if err := json.Unmarshal(out[i:], &fo); err != nil {
		return t, "", fmt.Errorf("bench: device: fio %s: parse JSON: %w", test, err)
	}
	if len(fo.Jobs) == 0 {
		return t, "", fmt.Errorf("bench: device: fio %s: no jobs in output", test)
	}
	j := fo.Jobs[0]
	if j.Error != 0 {
		return t, "", fmt.Errorf("bench: device: fio %s: job error %d", test, j.Error)
	}
	st := j.Write
	if j.Read.TotalIOs > 0 || j.Read.IOBytes > 0 {
		st = j.Read
	}
	t.MBPerSec = st.BwBytes / 1e6
	t.IOPS = st.IOPS
	t.P50Ms, t.P99Ms = st.Clat.pctMs("50.000000"), st.Clat.pctMs("99.000000")
	if test == DevFsync && j.Sync.TotalIOs > 0 {
		// One fsync per write: the rate of write+fsync pairs is the write
		// IOPS; the latency that matters is the fsync's.
		t.P50Ms, t.P99Ms = j.Sync.Lat.pctMs("50.000000"), j.Sync.Lat.pctMs("99.000000")
	}
	return t, fo.Version, nil
}

// alignedBuf returns n bytes aligned to 4 KiB, as O_DIRECT requires, filled
// with random bytes so compressing devices cannot cheat.
func alignedBuf(n int) []byte {
	b := make([]byte, n+4096)
	off := int(-uintptr(unsafe.Pointer(&b[0])) & 4095)
	b = b[off : off+n]
	var seed [32]byte
	_, _ = rand.NewChaCha8(seed).Read(b)
	return b
}

func runBuiltinDevice(ctx context.Context, dir string, opts DeviceOptions, res *DeviceResult) error {
	path := filepath.Join(dir, "terrace-bench-device.dat")
	fsyncPath := filepath.Join(dir, "terrace-bench-fsync.dat")
	defer func() {
		if !opts.Keep {
			os.Remove(path)
			os.Remove(fsyncPath)
		}
	}()
	flag := 0
	if res.Direct {
		flag = syscall.O_DIRECT
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|flag, 0o644)
	if err != nil {
		return fmt.Errorf("bench: device: %w", err)
	}
	defer f.Close()
	// Lay the file out fully first, so reads never hit holes.
	if err := layOut(f, opts.FileBytes); err != nil {
		return fmt.Errorf("bench: device: lay out %s: %w", path, err)
	}
	qd := opts.QueueDepth
	blocks1M := opts.FileBytes / MiB
	blocks4K := opts.FileBytes / (4 * KiB)
	tests := []struct {
		name  string
		bs    int64
		write bool
		next  func(w int, rng *rand.Rand, i int64) int64 // offset of the i-th I/O of worker w
	}{
		// Sequential: worker w streams through its own 1/qd of the file.
		{DevSeqWrite, MiB, true, func(w int, _ *rand.Rand, i int64) int64 {
			return seqOffset(w, qd, blocks1M, i) * MiB
		}},
		{DevSeqRead, MiB, false, func(w int, _ *rand.Rand, i int64) int64 {
			return seqOffset(w, qd, blocks1M, i) * MiB
		}},
		{DevRandRead, 4 * KiB, false, func(_ int, rng *rand.Rand, _ int64) int64 {
			return rng.Int64N(blocks4K) * 4 * KiB
		}},
		{DevRandWrite, 4 * KiB, true, func(_ int, rng *rand.Rand, _ int64) int64 {
			return rng.Int64N(blocks4K) * 4 * KiB
		}},
	}
	for _, tc := range tests {
		t, err := builtinIO(ctx, f, tc.name, tc.bs, tc.write, qd, opts.Runtime, tc.next)
		if err != nil {
			return err
		}
		res.Tests = append(res.Tests, t)
	}
	t, err := builtinFsync(ctx, fsyncPath, opts.Runtime)
	if err != nil {
		return err
	}
	res.Tests = append(res.Tests, t)
	return nil
}

func seqOffset(w, qd int, blocks, i int64) int64 {
	per := max(blocks/int64(qd), 1)
	return (int64(w)*per + i%per) % blocks
}

func layOut(f *os.File, size int64) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() >= size {
		return nil
	}
	buf := alignedBuf(int(MiB))
	for off := int64(0); off < size; off += MiB {
		if _, err := f.WriteAt(buf, off); err != nil {
			return err
		}
	}
	return f.Sync()
}

// builtinIO runs qd goroutines doing positioned I/O of bs bytes for d.
func builtinIO(ctx context.Context, f *os.File, name string, bs int64, write bool, qd int, d time.Duration,
	next func(w int, rng *rand.Rand, i int64) int64) (DeviceTest, error) {
	deadline := time.Now().Add(d)
	hists := make([]Histogram, qd)
	var ops atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for w := range qd {
		wg.Go(func() {
			buf := alignedBuf(int(bs))
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := int64(0); ctx.Err() == nil && time.Now().Before(deadline); i++ {
				off := next(w, rng, i)
				t0 := time.Now()
				var err error
				if write {
					_, err = f.WriteAt(buf, off)
				} else {
					_, err = f.ReadAt(buf, off)
					if err == io.EOF {
						err = nil
					}
				}
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				hists[w].Record(time.Since(t0))
				ops.Add(1)
			}
		})
	}
	wg.Wait()
	if write {
		// Count the flush: a write is not measured until it reached the device.
		if err := f.Sync(); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	elapsed := time.Since(start).Seconds()
	if firstErr != nil {
		return DeviceTest{}, fmt.Errorf("bench: device: %s: %w", name, firstErr)
	}
	var h Histogram
	for i := range hists {
		h.Merge(&hists[i])
	}
	n := float64(ops.Load())
	return DeviceTest{Name: name, BlockBytes: bs, QueueDepth: qd,
		MBPerSec: n * float64(bs) / elapsed / 1e6, IOPS: n / elapsed,
		P50Ms: float64(h.Quantile(0.5)) / 1e6, P99Ms: float64(h.Quantile(0.99)) / 1e6}, ctx.Err()
}

// builtinFsync appends 4 KiB and fsyncs, serially, for d (wrapping at 16 MiB).
func builtinFsync(ctx context.Context, path string, d time.Duration) (DeviceTest, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return DeviceTest{}, fmt.Errorf("bench: device: %w", err)
	}
	defer f.Close()
	buf := alignedBuf(4096)
	var h Histogram
	start := time.Now()
	deadline := start.Add(d)
	var n int64
	for ; ctx.Err() == nil && time.Now().Before(deadline); n++ {
		if _, err := f.WriteAt(buf, (n%4096)*4096); err != nil {
			return DeviceTest{}, fmt.Errorf("bench: device: fsync test: %w", err)
		}
		t0 := time.Now()
		if err := f.Sync(); err != nil {
			return DeviceTest{}, fmt.Errorf("bench: device: fsync test: %w", err)
		}
		h.Record(time.Since(t0))
	}
	elapsed := time.Since(start).Seconds()
	return DeviceTest{Name: DevFsync, BlockBytes: 4096, QueueDepth: 1,
		MBPerSec: float64(n) * 4096 / elapsed / 1e6, IOPS: float64(n) / elapsed,
		P50Ms: float64(h.Quantile(0.5)) / 1e6, P99Ms: float64(h.Quantile(0.99)) / 1e6}, ctx.Err()
}

// WriteDeviceTable prints a device baseline.
func WriteDeviceTable(w io.Writer, r *DeviceResult) error {
	mode := "O_DIRECT"
	if !r.Direct {
		mode = "buffered"
	}
	fmt.Fprintf(w, "%s: %s, %s, %s file, %.0fs per test\n", r.Dir, r.Engine, mode, FormatBytes(r.FileBytes), r.RuntimeSeconds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "test\tblock\tdepth\tMB/s\tIOPS\tp50\tp99\t")
	for _, t := range r.Tests {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t\n", t.Name, FormatBytes(t.BlockBytes), t.QueueDepth,
			FormatRate(t.MBPerSec), FormatRate(t.IOPS), FormatMs(t.P50Ms), FormatMs(t.P99Ms))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}
