package object

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/terrace-storage/terrace/internal/device"
	"github.com/terrace-storage/terrace/internal/extent"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

// sweepFile is one replica file in a sweep test.
type sweepFile struct {
	dev model.DeviceID
	id  uint64
}

// age sets a replica file's modification time to ago before now (on the
// real file: the sweep reads the filesystem's mtime).
func (e *env) age(f sweepFile, ago time.Duration) {
	e.t.Helper()
	st, _ := e.local.Store(f.dev)
	p := filepath.Join(st.Device().Spec().Path, filepath.FromSlash(extent.FileName(f.id)))
	old := time.Now().Add(-ago)
	if err := os.Chtimes(p, old, old); err != nil {
		e.t.Fatal(err)
	}
}

// replicaFiles lists every replica file on the env's devices with its size.
func (e *env) replicaFiles() map[sweepFile]int64 {
	e.t.Helper()
	out := map[sweepFile]int64{}
	for _, d := range e.local.Devices() {
		st, _ := e.local.Store(d.ID())
		infos, err := st.ListInfo()
		if err != nil {
			e.t.Fatal(err)
		}
		for _, fi := range infos {
			out[sweepFile{d.ID(), fi.ID}] = fi.Size
		}
	}
	return out
}

// orphanFile creates a replica file of n bytes for egroup id on dev.
func (e *env) orphanFile(dev model.DeviceID, id uint64, n int) sweepFile {
	e.t.Helper()
	st, _ := e.local.Store(dev)
	if err := st.Create(id); err != nil {
		e.t.Fatal(err)
	}
	if n > 0 {
		if err := st.Append(id, 0, bytes.Repeat([]byte{0xab}, n)); err != nil {
			e.t.Fatal(err)
		}
	}
	return sweepFile{dev, id}
}

func (e *env) putRecord(id uint64, eg meta.Egroup) {
	e.t.Helper()
	var t meta.Txn
	t.Put(meta.EgroupKey(id), meta.Encode(eg))
	if _, err := e.kv.Commit(context.Background(), &t); err != nil {
		e.t.Fatal(err)
	}
}

// A sweep removes replica files that no egroup record lists on their
// device and that have not been modified for the grace — a file of an
// egroup never recorded, a file of an egroup whose record was deleted (a
// removal that crashed before deleting its files), a file a move left on
// a device the record no longer lists — and leaves every recorded
// replica, a fresh file without a record and the objects' bytes alone.
func TestSweepOrphansRemovesOldOrphans(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.l.CreateBucket(ctx, "bkt", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	data := payload(1, 3<<20+5)
	e.put("bkt", "keep", data, "ssd=1,hdd=1")
	// "gone" is deleted, then its first (full, sealed) egroup's record
	// too, as data removal does; its files stay behind, as after a crash
	// between the two.
	e.put("bkt", "gone", payload(2, 1<<20+(512<<10)), "hdd=2")
	loc, err := e.l.Locate(ctx, "bkt", "gone")
	if err != nil {
		t.Fatal(err)
	}
	deleted := loc.Extents[0].Egroup
	eg, _, err := e.l.Egroup(ctx, deleted)
	if err != nil || eg.State != meta.EgroupSealed {
		t.Fatalf("egroup %d: %+v %v, want a sealed egroup", deleted, eg, err)
	}
	if err := e.l.Delete(ctx, "bkt", "gone"); err != nil {
		t.Fatal(err)
	}
	var del meta.Txn
	del.Del(meta.EgroupKey(deleted))
	if _, err := e.kv.Commit(ctx, &del); err != nil {
		t.Fatal(err)
	}
	var orphans []sweepFile
	for _, r := range eg.Replicas {
		orphans = append(orphans, sweepFile{r.Device, deleted})
	}

	devs := e.local.Devices()
	ssd, hdd0, hdd1 := devs[0].ID(), devs[1].ID(), devs[2].ID()
	const unknown, movedAway, fresh = 900001, 900002, 900003
	orphans = append(orphans, e.orphanFile(hdd0, unknown, 10000))
	// movedAway's sealed record lists ssd only: its file on hdd1 is what a
	// move leaves when it crashes after switching the record.
	moved := meta.Egroup{Replicas: []meta.EgroupReplica{{Device: ssd, Node: "n1", Tier: model.TierSSD}}, State: meta.EgroupSealed, Size: 3000}
	e.putRecord(movedAway, moved)
	e.orphanFile(ssd, movedAway, 3000)
	orphans = append(orphans, e.orphanFile(hdd1, movedAway, 3000))
	freshFile := e.orphanFile(hdd1, fresh, 700)

	// Age every file but the fresh one, recorded replicas included, so
	// that the sweep looks at all of them.
	before := e.replicaFiles()
	for f := range before {
		if f != freshFile {
			e.age(f, 2*time.Hour)
		}
	}
	runtime.GC() // the writers of "gone" are done: nothing holds its egroups

	rep, err := e.l.SweepOrphans(ctx, e.local)
	if err != nil {
		t.Fatal(err)
	}
	after := e.replicaFiles()
	var wantBytes int64
	for _, o := range orphans {
		if _, ok := after[o]; ok {
			t.Errorf("orphan %v survived the sweep (report %s)", o, rep)
		}
		wantBytes += before[o]
	}
	for f, sz := range before {
		if slices.Contains(orphans, f) {
			continue
		}
		if got, ok := after[f]; !ok || got != sz {
			t.Errorf("file %v: size %d present %v after the sweep, want %d", f, got, ok, sz)
		}
	}
	if rep.Removed != len(orphans) || rep.RemovedBytes != wantBytes || rep.Candidates != len(orphans) || rep.Fresh != 1 || rep.Errors != 0 {
		t.Errorf("report %s, want %d removed (%d bytes), 1 fresh", rep, len(orphans), wantBytes)
	}
	if got := counterValue(e.l.m.orphanFiles); got != float64(len(orphans)) {
		t.Errorf("orphan files metric %v, want %d", got, len(orphans))
	}
	if got := counterValue(e.l.m.orphanBytes); got != float64(wantBytes) {
		t.Errorf("orphan bytes metric %v, want %d", got, wantBytes)
	}
	// The moved-away record was fenced, not changed.
	if eg, _, err := e.l.Egroup(ctx, movedAway); err != nil || len(eg.Replicas) != 1 || eg.Replicas[0].Device != ssd {
		t.Errorf("moved-away record %+v %v, want it as it was", eg, err)
	}
	got, err := e.get("bkt", "keep", 0, -1)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("object after the sweep: %v (%d bytes)", err, len(got))
	}
	// The survivors are what a second sweep leaves alone.
	rep, err = e.l.SweepOrphans(ctx, e.local)
	if err != nil || rep.Removed != 0 || rep.Candidates != 0 {
		t.Fatalf("second sweep %s %v, want nothing to do", rep, err)
	}
}

// What changes between the sweep's first look and the removal keeps the
// file: a record committed for it, a record that moves on (the fence
// fails), an egroup a writer of this node holds, an egroup the other
// nodes could not be asked about. A record committed right after the
// removal marks the replica bad.
func TestSweepOrphansRechecksBeforeRemoving(t *testing.T) {
	var holdsErr error
	e := newEnv(t)
	e.tweak = func(o *Options) {
		o.OrphanHolds = func(ctx context.Context, ids []uint64) ([]uint64, error) { return nil, holdsErr }
	}
	e.restart()
	ctx := context.Background()
	dev := e.local.Devices()[1].ID()
	other := e.local.Devices()[0].ID()
	const lateCommit, lateSwitch, held, raced, unasked, movedAway = 900101, 900102, 900103, 900104, 900105, 900106
	sealedOn := func(d model.DeviceID) meta.Egroup {
		return meta.Egroup{Replicas: []meta.EgroupReplica{{Device: d, Node: "n1"}}, State: meta.EgroupSealed, Size: 100}
	}
	file := func(id uint64) sweepFile {
		f := e.orphanFile(dev, id, 100)
		e.age(f, time.Hour)
		return f
	}
	present := func(ids ...uint64) (out []uint64) {
		left := e.replicaFiles()
		for _, id := range ids {
			if _, ok := left[sweepFile{dev, id}]; ok {
				out = append(out, id)
			}
		}
		return out
	}
	e.putRecord(lateSwitch, sealedOn(other))
	for _, id := range []uint64{lateCommit, lateSwitch, held, raced} {
		file(id)
	}
	// held: a writer of this node created it and may still commit it.
	writer := &openEgroup{id: held}
	e.l.inflight.add(writer)
	e.l.sweepHook = func(stage string, d model.DeviceID, id uint64) {
		switch {
		case stage == "candidate" && id == lateCommit:
			e.putRecord(id, sealedOn(d)) // a writer's commit lands
		case stage == "candidate" && id == lateSwitch:
			e.putRecord(id, sealedOn(other)) // the record moves on
		case stage == "removed" && id == raced:
			e.putRecord(id, sealedOn(d)) // committed the moment after the removal
		}
	}
	rep, err := e.l.SweepOrphans(ctx, e.local)
	if err != nil {
		t.Fatal(err)
	}
	if got := present(lateCommit, lateSwitch, held, raced); !slices.Equal(got, []uint64{lateCommit, lateSwitch, held}) {
		t.Errorf("files left %v, want all but the raced one (report %s)", got, rep)
	}
	if rep.Candidates != 4 || rep.Removed != 1 || rep.Held != 1 || rep.Kept != 2 || rep.Races != 1 {
		t.Errorf("report %s, want 4 candidates: 1 removed (a race), 1 held, 2 kept", rep)
	}
	eg, _, err := e.l.Egroup(ctx, raced)
	if err != nil || len(eg.Replicas) != 1 || !eg.Replicas[0].Bad {
		t.Errorf("raced egroup %+v %v, want its replica marked bad", eg, err)
	}
	if got := counterValue(e.l.m.orphanRaces); got != 1 {
		t.Errorf("races metric %v, want 1", got)
	}

	// The other nodes cannot be asked: files without a record stay,
	// files whose record lists other devices go (the fence covers them).
	// lateSwitch's record is stable now: it goes too.
	e.l.sweepHook = nil
	holdsErr = errors.New("node n2 unreachable")
	e.putRecord(movedAway, sealedOn(other))
	file(unasked)
	file(movedAway)
	rep, err = e.l.SweepOrphans(ctx, e.local)
	if err != nil {
		t.Fatal(err)
	}
	if got := present(lateCommit, lateSwitch, held, unasked, movedAway); !slices.Equal(got, []uint64{lateCommit, held, unasked}) {
		t.Errorf("files left %v, want the recorded, the held and the unasked one (report %s)", got, rep)
	}
	if rep.Candidates != 4 || rep.Removed != 2 || rep.Held != 2 {
		t.Errorf("report %s, want 4 candidates: 2 removed, 2 held", rep)
	}
	runtime.KeepAlive(writer)
}

// A file modified within the grace is not looked at, however long ago its
// egroup record went away; the grace is never below MinOrphanSweepGrace,
// even with a start-up grace of 0.
func TestSweepOrphansKeepsFreshFiles(t *testing.T) {
	e := newEnv(t)
	if e.l.OrphanSweepGrace() != MinOrphanSweepGrace {
		t.Fatalf("grace %s with OrphanGrace 0, want %s", e.l.OrphanSweepGrace(), MinOrphanSweepGrace)
	}
	dev := e.local.Devices()[0].ID()
	young := e.orphanFile(dev, 900201, 100)
	e.age(young, MinOrphanSweepGrace-time.Minute)
	now := e.orphanFile(dev, 900202, 100)
	rep, err := e.l.SweepOrphans(context.Background(), e.local)
	if err != nil {
		t.Fatal(err)
	}
	left := e.replicaFiles()
	if _, ok := left[young]; !ok {
		t.Error("a file modified 9 minutes ago was removed")
	}
	if _, ok := left[now]; !ok {
		t.Error("a file just written was removed")
	}
	if rep.Fresh != 2 || rep.Removed != 0 {
		t.Errorf("report %s, want 2 fresh files, none removed", rep)
	}
}

// A mem device has modification times too (the last write).
func TestSweepOrphansOnMemDevice(t *testing.T) {
	e := newEnv(t, "mem::64MiB", "hdd:hdd0:1GiB")
	mem := e.local.Devices()[0].ID()
	e.orphanFile(mem, 900301, 100)
	st, _ := e.local.Store(mem)
	fi, err := st.Stat(900301)
	if err != nil || time.Since(fi.ModTime) > time.Minute || fi.Size != 100 {
		t.Fatalf("mem file info %+v %v, want written just now, 100 bytes", fi, err)
	}
	rep, err := e.l.SweepOrphans(context.Background(), e.local)
	if err != nil || rep.Fresh != 1 || rep.Removed != 0 {
		t.Fatalf("sweep %s %v, want the fresh mem file kept", rep, err)
	}
	if _, err := st.Stat(900399); !errors.Is(err, device.ErrNotExist) {
		t.Fatalf("stat of a missing file: %v, want ErrNotExist", err)
	}
}

// The periodic sweep stops at Close, also in the middle of a pass that
// its rate limit makes long.
func TestOrphanSweepStopsOnClose(t *testing.T) {
	e := newEnv(t)
	e.tweak = func(o *Options) { o.OrphanSweepRate = 1 }
	e.restart()
	dev := e.local.Devices()[0].ID()
	for i := range 40 {
		e.age(e.orphanFile(dev, uint64(900400+i), 10), time.Hour)
	}
	e.l.StartOrphanSweep(context.Background(), e.local, 10*time.Millisecond)
	time.Sleep(300 * time.Millisecond) // a pass is under way, ~40 s long at 1 record/s
	done := make(chan struct{})
	go func() { e.l.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not stop the orphan sweep")
	}
	if n := len(e.replicaFiles()); n == 0 || n > 40 {
		t.Fatalf("%d files left", n)
	}
}

// A large PUT commits its egroups' records at its end: an egroup it
// filled early has files without a record that nobody modifies for as
// long as the rest of the stream takes. The sweep leaves them to the
// writer, which registered the egroup before creating them.
func TestSweepOrphansSparesAWriteInProgress(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.l.CreateBucket(ctx, "bkt", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	data := payload(3, 3<<20)
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := e.l.Put(ctx, "bkt", "big", pr, PutOptions{Size: int64(len(data)), Vector: model.MustParseVector("hdd=2")})
		done <- err
	}()
	if _, err := pw.Write(data[:3<<19]); err != nil {
		t.Fatal(err)
	}
	// Wait until the writer has moved on to its second egroup: the first
	// is full and takes no more appends.
	deadline := time.Now().Add(10 * time.Second)
	for {
		ids := map[uint64]bool{}
		for f := range e.replicaFiles() {
			ids[f.id] = true
		}
		if len(ids) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the writer made %d egroups", len(ids))
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	for f := range e.replicaFiles() {
		e.age(f, time.Hour)
	}
	runtime.GC() // only what is unreachable lapses
	rep, err := e.l.SweepOrphans(ctx, e.local)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Removed != 0 || rep.Held < 2 {
		t.Fatalf("report %s, want the unrecorded egroups of the write in progress held, none removed", rep)
	}
	if _, err := pw.Write(data[3<<19:]); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got, err := e.get("bkt", "big", 0, -1)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("object after the sweep: %v (%d bytes)", err, len(got))
	}
}

// Start-up recovery's deferred removal (a cluster's grace) asks the
// other nodes too: a file whose egroup a peer's writer still holds stays.
func TestOrphanRecoveryAsksOtherNodes(t *testing.T) {
	e := newEnv(t)
	dev := e.local.Devices()[0].ID()
	const peerWrites, orphan = 900501, 900502
	e.orphanFile(dev, peerWrites, 100)
	e.orphanFile(dev, orphan, 100)
	e.tweak = func(o *Options) {
		o.OrphanGrace = 100 * time.Millisecond
		o.OrphanHolds = func(_ context.Context, ids []uint64) ([]uint64, error) {
			return slices.DeleteFunc(slices.Clone(ids), func(id uint64) bool { return id != peerWrites }), nil
		}
	}
	e.restart()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := e.replicaFiles()
		if _, ok := left[sweepFile{dev, orphan}]; !ok {
			if _, ok := left[sweepFile{dev, peerWrites}]; !ok {
				t.Fatal("recovery removed a file whose egroup a peer's writer holds")
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the orphan is still there long after the grace")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSweepSealsAnAbandonedOpenEgroup: an egroup left open in its record
// that no writer holds any more (its writer's last commit failed without
// saying whether it landed, and the seal that should follow failed too)
// would stay open until the node restarts: never moved, repaired or
// collected. The sweep seals it once its files have been idle for the
// grace; an open egroup a writer holds is left alone.
func TestSweepSealsAnAbandonedOpenEgroup(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.l.CreateBucket(ctx, "bkt", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	e.put("bkt", "held", payload(3, 50_000), "")
	held := e.egroupOf("bkt", "held")
	heldEg, _, _ := e.l.Egroup(ctx, held)
	if heldEg.State != meta.EgroupOpen {
		t.Fatalf("the pool's egroup is %v, want open", heldEg.State)
	}
	for _, r := range heldEg.Replicas {
		e.age(sweepFile{r.Device, held}, time.Hour)
	}
	dev := heldEg.Replicas[0].Device
	const lost = 900600
	f := e.orphanFile(dev, lost, 0)
	e.putRecord(lost, meta.Egroup{State: meta.EgroupOpen, Writer: "n1", Vector: model.MustParseVector("any=1"),
		Replicas: []meta.EgroupReplica{{Device: dev, Node: "n1"}}})
	e.age(f, time.Hour)
	rep, err := e.l.SweepOrphans(ctx, e.local)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Sealed != 1 {
		t.Fatalf("sweep: %v, want the abandoned egroup sealed", rep)
	}
	if eg, _, _ := e.l.Egroup(ctx, lost); eg.State != meta.EgroupSealed {
		t.Fatalf("abandoned egroup is %v after the sweep, want sealed", eg.State)
	}
	if eg, _, _ := e.l.Egroup(ctx, held); eg.State != meta.EgroupOpen {
		t.Fatalf("the egroup a writer holds is %v after the sweep, want open", eg.State)
	}
	e.mustRead("bkt", "held", payload(3, 50_000))
}
