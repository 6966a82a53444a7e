package device

import (
	"bytes"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/model"
)

func TestParseSpec(t *testing.T) {
	good := map[string]Spec{
		"ssd:/data/ssd0:20GiB":         {Tier: "ssd", Path: "/data/ssd0", Capacity: 20 << 30},
		"mem::2GiB":                    {Tier: "mem", Capacity: 2 << 30},
		"hdd:/d/h:200GiB:hdd":          {Tier: "hdd", Path: "/d/h", Capacity: 200 << 30, Profile: "hdd"},
		"hdd:rel/dir:1.5G:none":        {Tier: "hdd", Path: "rel/dir", Capacity: 3 << 29, Profile: "none"},
		"hdd:/d/h:1GiB:hdd/6":          {Tier: "hdd", Path: "/d/h", Capacity: 1 << 30, Profile: "hdd/6"},
		"archive:/a:1TB":               {Tier: "archive", Path: "/a", Capacity: 1e12},
		"remote:http://h:9000/b/p:1TB": {Tier: "remote", Path: "http://h:9000/b/p", Capacity: 1e12},
	}
	for in, want := range good {
		got, err := ParseSpec(in)
		if err != nil {
			t.Errorf("ParseSpec(%q): %v", in, err)
			continue
		}
		if got != want {
			t.Errorf("ParseSpec(%q) = %+v, want %+v", in, got, want)
		}
	}
	bad := []string{
		"", "ssd", "ssd:/x", "ssd:/x:", "ssd:/x:abc", "ssd:/x:0", "ssd:/x:-1G", "ssd:/x:NaN",
		"ssd:/x:1G:nosuchprofile", "hdd:/x:1G:hdd/0.5", "hdd:/x:1G:hdd/0", "hdd:/x:1G:hdd/-2", "hdd:/x:1G:hdd/x", "hdd:/x:1G:hdd/NaN", "hdd:/x:1G:hdd/Inf", "hdd:/x:1G:nope/2", "hdd:/x:1G:hdd/", "a:b:c:d:e", "any:/x:1G", ":/x:1G", "Bad Tier:/x:1G",
		"mem:/path:1G", "ssd::1G", "hdd::1G", "ssd:/x:1e300", "remote:s3://b:0", "remote:nota-url://:1G:extra",
	}
	for _, in := range bad {
		if sp, err := ParseSpec(in); err == nil {
			t.Errorf("ParseSpec(%q) = %+v, want an error", in, sp)
		} else if !strings.Contains(err.Error(), "device") && !strings.Contains(err.Error(), "size") {
			t.Errorf("ParseSpec(%q): error %q does not say what is wrong", in, err)
		}
	}
}

func TestParseBytes(t *testing.T) {
	good := map[string]int64{
		"0": 0, "512": 512, "512B": 512, "4KiB": 4096, "4K": 4096, "1.5GB": 1.5e9, "10M": 10 << 20,
		" 2 MiB ": 2 << 20, "1TiB": 1 << 40, "3KB": 3000,
	}
	for in, want := range good {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "abc", "-1", "-1KiB", "1.2.3", "KiB", "1 mib", "NaN", "nan", "Inf", "+Inf", "1e300", "8EiB", "9999999TiB"} {
		if got, err := ParseBytes(in); err == nil {
			t.Errorf("ParseBytes(%q) = %d, want an error", in, got)
		}
	}
	for _, n := range []int64{0, 1, 1023, 1024, 1536, 20 << 30, 3 << 40} {
		s := FormatBytes(n)
		back, err := ParseBytes(s)
		if err != nil || math.Abs(float64(back-n)) > float64(n)/20 {
			t.Errorf("FormatBytes(%d) = %q parses back as %d, %v", n, s, back, err)
		}
	}
}

func openDir(t *testing.T, capacity int64) (*Device, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "dev")
	d, err := Open("n1/ssd0", Spec{Tier: "ssd", Path: dir, Capacity: capacity})
	if err != nil {
		t.Fatal(err)
	}
	return d, dir
}

func openMem(t *testing.T, capacity int64) *Device {
	t.Helper()
	d, err := Open("n1/mem0", Spec{Tier: model.TierMem, Capacity: capacity})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func write(t *testing.T, f File, p []byte, off int64) {
	t.Helper()
	if n, err := f.WriteAt(p, off); err != nil || n != len(p) {
		t.Fatalf("write %d bytes at %d: %d, %v", len(p), off, n, err)
	}
}

func bytesOf(n int, b byte) []byte { return bytes.Repeat([]byte{b}, n) }

// devices runs fn on a directory device and on a RAM device.
func devices(t *testing.T, capacity int64, fn func(t *testing.T, d *Device)) {
	t.Run("dir", func(t *testing.T) { d, _ := openDir(t, capacity); fn(t, d) })
	t.Run("mem", func(t *testing.T) { fn(t, openMem(t, capacity)) })
}

func TestCapacityExceededWritesNothing(t *testing.T) {
	devices(t, 1<<20, func(t *testing.T, d *Device) {
		f, err := d.Create("eg/00/a.eg")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		write(t, f, bytesOf(600<<10, 1), 0)
		g, err := d.Create("eg/01/b.eg")
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		// A new file that does not fit.
		n, err := g.WriteAt(bytesOf(500<<10, 2), 0)
		if !errors.Is(err, ErrFull) || n != 0 {
			t.Fatalf("write past capacity: %d, %v; want 0, ErrFull", n, err)
		}
		if !strings.Contains(err.Error(), "capacity") {
			t.Errorf("ErrFull message %q does not name the capacity", err)
		}
		// Growing an existing file past capacity: nothing written either.
		if _, err := f.WriteAt(bytesOf(500<<10, 3), 600<<10); !errors.Is(err, ErrFull) {
			t.Fatalf("growth past capacity: %v", err)
		}
		if f.Size() != 600<<10 || g.Size() != 0 || d.Used() != 600<<10 {
			t.Fatalf("after failed writes: sizes %d/%d, used %d", f.Size(), g.Size(), d.Used())
		}
		got := make([]byte, 600<<10)
		if n, err := f.ReadAt(got, 0); (err != nil && err != io.EOF) || n != len(got) || !bytes.Equal(got, bytesOf(600<<10, 1)) {
			t.Fatalf("existing data changed by a failed write: %d %v", n, err)
		}
		if n, err := f.ReadAt(make([]byte, 10), 600<<10); n != 0 || err != io.EOF {
			t.Fatalf("read past end: %d, %v", n, err)
		}
		// Overwriting in place needs no space; filling exactly to capacity works.
		write(t, f, bytesOf(100, 4), 0)
		write(t, g, bytesOf(int(d.Capacity()-d.Used()), 5), 0)
		if d.Used() != d.Capacity() {
			t.Fatalf("used %d, capacity %d", d.Used(), d.Capacity())
		}
		if _, err := g.WriteAt([]byte{1}, g.Size()); !errors.Is(err, ErrFull) {
			t.Fatalf("one byte over capacity: %v", err)
		}
		if d.Failed() {
			t.Fatal("a full device was marked failed")
		}
		// Removing releases space.
		g.Close()
		if err := d.Remove("eg/01/b.eg"); err != nil {
			t.Fatal(err)
		}
		if d.Used() != 600<<10 {
			t.Fatalf("used %d after remove", d.Used())
		}
		if err := d.Remove("eg/01/b.eg"); !errors.Is(err, ErrNotExist) {
			t.Fatalf("remove missing: %v", err)
		}
		if _, err := d.OpenFile("nope"); !errors.Is(err, ErrNotExist) {
			t.Fatalf("open missing: %v", err)
		}
		if d.Failed() {
			t.Fatal("missing files marked the device failed")
		}
	})
}

func TestTruncateAndRecreateAccounting(t *testing.T) {
	devices(t, 1<<20, func(t *testing.T, d *Device) {
		f, err := d.Create("x")
		if err != nil {
			t.Fatal(err)
		}
		write(t, f, bytesOf(1000, 1), 0)
		if err := f.Truncate(300); err != nil {
			t.Fatal(err)
		}
		if f.Size() != 300 || d.Used() != 300 {
			t.Fatalf("after truncate: size %d used %d", f.Size(), d.Used())
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		// Create truncates an existing file; its bytes are no longer used.
		g, err := d.Create("x")
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		if g.Size() != 0 || d.Used() != 0 {
			t.Fatalf("re-created file: size %d, device used %d; want 0, 0", g.Size(), d.Used())
		}
		// A negative size is refused without taking the device down.
		if err := g.Truncate(-1); err == nil {
			t.Fatal("truncate to -1 succeeded")
		}
		if d.Failed() {
			t.Fatal("a bad truncate marked the device failed")
		}
	})
}

func TestDirDeviceReopen(t *testing.T) {
	d, dir := openDir(t, 1<<20)
	for _, name := range []string{"eg/00/a.eg", "eg/ff/b.eg", "top"} {
		f, err := d.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		write(t, f, bytesOf(1000, 7), 0)
		f.Close()
	}
	names, err := d.List()
	if err != nil || strings.Join(names, ",") != "eg/00/a.eg,eg/ff/b.eg,top" {
		t.Fatalf("list: %v %v", names, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "eg", "ff", "b.eg")); err != nil {
		t.Fatalf("file not where expected: %v", err)
	}
	// Usage is recomputed from the files at open.
	d2, err := Open("n1/ssd0", Spec{Tier: "ssd", Path: dir, Capacity: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if d2.Used() != 3000 {
		t.Fatalf("reopened used %d, want 3000", d2.Used())
	}
	f, err := d2.OpenFile("top")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Size() != 1000 {
		t.Fatalf("size %d", f.Size())
	}
	for _, name := range []string{"../escape", "/abs", ""} {
		if _, err := d2.Create(name); err == nil {
			t.Errorf("Create(%q) succeeded", name)
		}
	}
}

func TestMemDevice(t *testing.T) {
	d := openMem(t, 1<<20)
	f, err := d.Create("a")
	if err != nil {
		t.Fatal(err)
	}
	write(t, f, []byte("hello"), 0)
	write(t, f, []byte("world"), 10) // a hole reads as zeros
	got := make([]byte, 15)
	if n, err := f.ReadAt(got, 0); n != 15 || (err != nil && err != io.EOF) || string(got) != "hello\x00\x00\x00\x00\x00world" {
		t.Fatalf("read %q %d %v", got, n, err)
	}
	if n, err := f.ReadAt(make([]byte, 10), 12); n != 3 || err != io.EOF {
		t.Fatalf("short read: %d %v", n, err)
	}
	if err := f.Truncate(20); err != nil || f.Size() != 20 || d.Used() != 20 {
		t.Fatalf("grow by truncate: %v size %d used %d", err, f.Size(), d.Used())
	}
	g, _ := d.OpenFile("a")
	if g.Size() != 20 {
		t.Fatalf("second handle sees size %d", g.Size())
	}
	g.Close()
	names, _ := d.List()
	if len(names) != 1 || names[0] != "a" {
		t.Fatalf("list %v", names)
	}
	// A RAM device is volatile: a new one starts empty.
	if d2 := openMem(t, 1<<20); d2.Used() != 0 {
		t.Fatal("new mem device not empty")
	}
	st := d.Stats()
	if st.Writes < 2 || st.Reads < 2 || st.WriteBytes < 10 || st.CapacityBytes != 1<<20 {
		t.Fatalf("stats %+v", st)
	}
	// An open file with nothing in flight is not an active stream (the
	// extent store keeps handles open between operations).
	if st.ActiveStreams != 0 || st.QueueLen != 0 {
		t.Fatalf("idle open file: %d streams, %d queued", st.ActiveStreams, st.QueueLen)
	}
	f.Close()
	f.Close() // idempotent
	if d.Stats().ActiveStreams != 0 {
		t.Fatalf("streams %d after close", d.Stats().ActiveStreams)
	}
}

func TestFailedDevice(t *testing.T) {
	d := openMem(t, 1<<20)
	f, _ := d.Create("a")
	write(t, f, []byte("x"), 0)
	d.MarkFailed()
	if _, err := d.Create("b"); !errors.Is(err, ErrFailed) {
		t.Fatalf("create on failed device: %v", err)
	}
	if _, err := f.ReadAt(make([]byte, 1), 0); !errors.Is(err, ErrFailed) {
		t.Fatalf("read on failed device: %v", err)
	}
	if _, err := f.WriteAt([]byte("y"), 1); !errors.Is(err, ErrFailed) {
		t.Fatalf("write on failed device: %v", err)
	}
	if m := d.Model("n1", "r1"); m.State != model.DeviceFailed {
		t.Fatalf("model state %v", m.State)
	}
}

func TestProbe(t *testing.T) {
	d, dir := openDir(t, 64<<20)
	if err := d.Probe(2 << 20); err != nil {
		t.Fatal(err)
	}
	st := d.Stats()
	if st.ReadBps <= 0 || st.WriteBps <= 0 || st.UsedBytes != 0 {
		t.Fatalf("after probe: %+v", st)
	}
	if names, _ := d.List(); len(names) != 0 {
		t.Fatalf("probe left files: %v", names)
	}
	// A nearly full device still probes (with what fits) and keeps its data.
	d2, err := Open("n1/ssd0", Spec{Tier: "ssd", Path: dir, Capacity: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	f, _ := d2.Create("data")
	write(t, f, bytesOf(900<<10, 9), 0)
	if err := d2.Probe(4 << 20); err != nil {
		t.Fatalf("probe on a nearly full device: %v", err)
	}
	if d2.Used() != 900<<10 || d2.Stats().WriteBps <= 0 {
		t.Fatalf("after probe: used %d, stats %+v", d2.Used(), d2.Stats())
	}
	// A completely full one skips the probe rather than failing start-up.
	write(t, f, bytesOf(int(d2.Capacity()-d2.Used()), 9), 900<<10)
	if err := d2.Probe(4 << 20); err != nil {
		t.Fatalf("probe on a full device: %v", err)
	}
	if d2.Used() != d2.Capacity() {
		t.Fatalf("used %d after probe on a full device", d2.Used())
	}
}

func TestThrottle(t *testing.T) {
	th := NewThrottle(Profile{Name: "t", BytesPerSec: 100e6, OpLatency: 2 * time.Millisecond})
	start := time.Now()
	for i := 0; i < 4; i++ {
		th.Wait(1e6, false) // 10 ms of bandwidth each
	}
	if el := time.Since(start); el < 40*time.Millisecond {
		t.Fatalf("4 MB at 100 MB/s took %s", el)
	}
	// Emulated devices are slower than unthrottled ones at the same work.
	d, err := Open("n1/hdd0", Spec{Tier: "hdd", Path: filepath.Join(t.TempDir(), "h"), Capacity: 1 << 30, Profile: "hdd"})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Probe(1 << 20); err != nil {
		t.Fatal(err)
	}
	if bps := d.Stats().WriteBps; bps > 1.2*Profiles["hdd"].BytesPerSec {
		t.Fatalf("emulated hdd measured %.0f MB/s", bps/1e6)
	}
}

// A small operation that arrives while a large one is in progress is served
// between the large one's requests (as the block layer splits large I/O),
// not after all of it; on a serial device the large one then pays a seek
// to resume.
func TestThrottleInterleavesLargeOperations(t *testing.T) {
	p := Profile{Name: "disk", BytesPerSec: 100e6, OpLatency: 4 * time.Millisecond, Serial: true}
	th := NewThrottle(p)
	bigDone := make(chan time.Time, 1)
	go func() {
		th.Wait(8*MaxRequestBytes, false) // ≈ 42 ms of transfer + a seek
		bigDone <- time.Now()
	}()
	time.Sleep(5 * time.Millisecond)
	th.Wait(4096, false)
	smallDone := time.Now()
	big := <-bigDone
	if !smallDone.Before(big) {
		t.Fatalf("the small operation waited for the whole large one (small done %s after it)", smallDone.Sub(big))
	}
	// 8 requests back to back take 8 × 5.2 ms + one seek; the interleaved
	// small operation adds its own seek and one more for the large one.
	if th.seq < 9 {
		t.Fatalf("%d reservations, want at least 9 (8 requests + the small op)", th.seq)
	}
}

// ActiveStreams counts the files with an operation in flight (OctopusFS
// NrConn(m)), once per file however many operations it has in flight;
// QueueLen counts the operations. Handles open between operations count
// in neither.
func TestActiveStreamsAreFilesBeingAccessed(t *testing.T) {
	d := openMem(t, 1<<20)
	var files []File
	for _, name := range []string{"a", "b", "c"} {
		f, err := d.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt(make([]byte, 4096), 0); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if st := d.Stats(); st.ActiveStreams != 0 || st.QueueLen != 0 {
		t.Fatalf("three idle open files: %d streams, %d queued", st.ActiveStreams, st.QueueLen)
	}
	if err := d.InjectFault(Fault{Latency: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, f := range []File{files[0], files[0], files[1]} { // two reads of a, one of b
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.ReadAt(make([]byte, 100), 0)
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for d.Stats().QueueLen < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	st := d.Stats()
	wg.Wait()
	if st.QueueLen != 3 || st.ActiveStreams != 2 {
		t.Fatalf("two reads of a and one of b in flight: %d streams, %d queued; want 2 and 3", st.ActiveStreams, st.QueueLen)
	}
	if st := d.Stats(); st.ActiveStreams != 0 || st.QueueLen != 0 {
		t.Fatalf("after the reads: %d streams, %d queued", st.ActiveStreams, st.QueueLen)
	}
}

func TestLookupProfileScaled(t *testing.T) {
	p, ok := LookupProfile("hdd/6")
	if !ok || p.BytesPerSec != Profiles["hdd"].BytesPerSec/6 || p.OpLatency != Profiles["hdd"].OpLatency || !p.Serial || p.Name != "hdd/6" {
		t.Fatalf("hdd/6 = %+v, %v; want hdd with a sixth of its bandwidth", p, ok)
	}
	if p, ok := LookupProfile("ssd"); !ok || p != Profiles["ssd"] {
		t.Fatalf("ssd = %+v, %v", p, ok)
	}
	if Profiles["hdd"].BytesPerSec != 150e6 {
		t.Fatal("scaling a profile changed the built-in one")
	}
}
