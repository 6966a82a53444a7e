package device

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Every caller returns only after a flush that started after its call,
// and concurrent callers share flushes.
func TestGroupSyncCoversEveryCallerAndShares(t *testing.T) {
	var g groupSync
	var written atomic.Int64 // writes issued so far
	var mu sync.Mutex
	var starts []int64 // writes issued when each round started
	flush := func() error {
		mu.Lock()
		starts = append(starts, written.Load())
		mu.Unlock()
		return nil
	}
	const callers = 64
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := written.Add(1) // "write", then sync
			if err := g.sync(flush); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			covered := false
			for _, s := range starts {
				if s >= n {
					covered = true
				}
			}
			if !covered {
				t.Errorf("write %d returned before any flush that started after it (flush starts %v)", n, starts)
			}
		}()
	}
	wg.Wait()
	if len(starts) > callers {
		t.Fatalf("%d flushes for %d callers", len(starts), callers)
	}
	t.Logf("%d callers shared %d flushes", callers, len(starts))
}

// A failed round fails the callers it covered and only them; a later
// round's success does not hide the error.
// TestGroupSyncErrorIsSticky: syncfs writes back every dirty page present
// while it runs, including pages of writers that wrote after the round
// started and wait for the next one, and reports a writeback error once,
// marking those pages clean. So no round after a failed one may report
// success: neither a caller queued behind the failing round (its pages may
// be the ones lost) nor any later caller.
func TestGroupSyncErrorIsSticky(t *testing.T) {
	var g groupSync
	if err := g.sync(func() error { return nil }); err != nil {
		t.Fatalf("first round: %v", err)
	}
	boom := errors.New("EIO")
	release := make(chan struct{})
	inFlush := make(chan struct{})
	first := make(chan error)
	go func() {
		first <- g.sync(func() error { close(inFlush); <-release; return boom })
	}()
	<-inFlush
	second := make(chan error)
	go func() { second <- g.sync(func() error { return nil }) }()
	time.Sleep(20 * time.Millisecond) // the second caller queues behind the running round
	close(release)
	if err := <-first; !errors.Is(err, boom) {
		t.Fatalf("caller of the failing round: %v", err)
	}
	if err := <-second; !errors.Is(err, boom) {
		t.Fatalf("caller queued behind the failing round: %v, want its error (the round may have dropped its pages)", err)
	}
	if err := g.sync(func() error { return nil }); !errors.Is(err, boom) {
		t.Fatalf("a later round: %v, want the earlier failure", err)
	}
}

func TestSyncModeFSOnADevice(t *testing.T) {
	d, err := Open("n1/ssd0", Spec{Tier: "ssd", Path: filepath.Join(t.TempDir(), "d"), Capacity: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.SetSyncMode(SyncFS); err != nil {
		t.Skipf("syncfs not available here: %v", err)
	}
	if d.SyncMode() != SyncFS {
		t.Fatalf("mode %s", d.SyncMode())
	}
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := d.Create(fmt.Sprintf("f%d", i))
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			for j := range 20 {
				if _, err := f.WriteAt(bytes.Repeat([]byte{byte(j)}, 4096), int64(j)*4096); err != nil {
					t.Error(err)
					return
				}
				if err := f.Sync(); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	st := d.Stats()
	if st.Syncs != 16*20 || st.SyncRounds == 0 || st.SyncRounds > st.Syncs {
		t.Fatalf("syncs %d in %d rounds", st.Syncs, st.SyncRounds)
	}
	t.Logf("%d syncs in %d syncfs rounds", st.Syncs, st.SyncRounds)

	// An injected sync fault still fails the sync.
	f, err := d.Create("faulty")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := d.InjectFault(Fault{WriteErr: 1}); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err == nil {
		t.Fatal("sync succeeded under an injected fault")
	}
	if err := d.InjectFault(Fault{}); err != nil {
		t.Fatal(err)
	}
	// The pages that failed may be gone: a later sync must not say
	// "durable" (fsyncgate); the device is out of service.
	if err := f.Sync(); !errors.Is(err, ErrFailed) {
		t.Fatalf("sync after a failed sync: %v, want ErrFailed", err)
	}
	if err := d.SetSyncMode(SyncFile); err != nil || d.SyncMode() != SyncFile {
		t.Fatalf("back to file mode: %v, %s", err, d.SyncMode())
	}
}

func TestSyncModeParseAndRefusal(t *testing.T) {
	for _, s := range []string{"", "file", "fs"} {
		if _, err := ParseSyncMode(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	if _, err := ParseSyncMode("fdatasync"); err == nil {
		t.Error("accepted an unknown mode")
	}
	m, err := Open("n1/mem0", Spec{Tier: "mem", Capacity: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SetSyncMode(SyncFS); err == nil {
		t.Error("a RAM device accepted sync mode fs")
	}
	for _, c := range []struct {
		rel          string
		major, minor int
		ok           bool
	}{{"6.18.44-fc-v657", 6, 18, true}, {"5.8.0", 5, 8, true}, {"4.19-rc1", 4, 19, true}, {"garbage", 0, 0, false}} {
		ma, mi, ok := kernelVersion(c.rel)
		if ok != c.ok || ok && (ma != c.major || mi != c.minor) {
			t.Errorf("kernelVersion(%q) = %d, %d, %v", c.rel, ma, mi, ok)
		}
	}
}

func TestSyncModeAutoUsesFSOnlyOnAMountPoint(t *testing.T) {
	if !isMountPoint("/") {
		t.Skip("cannot tell mount points here")
	}
	if isMountPoint(t.TempDir()) {
		t.Skip("the temp dir is a mount point of its own")
	}
	d, err := Open("n1/hdd0", Spec{Tier: "hdd", Path: filepath.Join(t.TempDir(), "d"), Capacity: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.SetSyncMode(SyncAuto); err != nil {
		t.Fatal(err)
	}
	if d.SyncMode() != SyncFile {
		t.Fatalf("auto on a plain directory chose %s, want file (syncfs would flush a shared filesystem)", d.SyncMode())
	}
}
