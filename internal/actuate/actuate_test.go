package actuate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/device"
	"github.com/terrace-storage/terrace/internal/extent"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/placement"
)

// env is a real object layer (Pebble, directory devices) with an
// actuator over it.
type env struct {
	t    *testing.T
	dir  string
	kv   *meta.Pebble
	l    *object.Layer
	devs map[model.DeviceID]*device.Device
	act  *Actuator
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvOn(t, "ssd0", "hdd0", "hdd1", "hdd2")
}

// newEnvOn is newEnv with the given devices of node n1 (named by tier and
// index, as "hdd0").
func newEnvOn(t *testing.T, names ...string) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), devs: map[model.DeviceID]*device.Device{}}
	var devs []*device.Device
	for _, n := range names {
		tier := model.Tier(n[:3])
		d, err := device.Open(model.DeviceID("n1/"+n), device.Spec{Tier: tier, Path: filepath.Join(e.dir, n), Capacity: 1 << 30})
		if err != nil {
			t.Fatal(err)
		}
		d.SetThroughput(100e6, 100e6)
		devs = append(devs, d)
		e.devs[d.ID()] = d
	}
	kv, err := meta.OpenPebble(filepath.Join(e.dir, "meta"))
	if err != nil {
		t.Fatal(err)
	}
	e.kv = kv
	local := object.NewLocal("n1", "r1", devs)
	pol, _ := placement.New(placement.Config{Name: "fitness"})
	e.l, err = object.New(kv, local, local, object.Options{Policy: pol, ExtentMaxBytes: 256 << 10, EgroupMaxBytes: 1 << 20, StatsInterval: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.l.Close(); kv.Close() })
	e.act = New(e.l, NewScheduler(Limits{}, 1e12, Signals{}), nil)
	if err := e.l.CreateBucket(context.Background(), "bkt", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	return e
}

func data(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 9))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// put writes an object with vector hdd=2 and returns its (sealed) egroup.
func (e *env) put(key string, b []byte) (uint64, meta.Egroup, int64) {
	e.t.Helper()
	ctx := context.Background()
	if _, err := e.l.Put(ctx, "bkt", key, bytes.NewReader(b), object.PutOptions{Size: int64(len(b)), Vector: model.MustParseVector("hdd=2")}); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.l.SealIdle(ctx, -1); err != nil {
		e.t.Fatal(err)
	}
	loc, err := e.l.Locate(ctx, "bkt", key)
	if err != nil {
		e.t.Fatal(err)
	}
	id := loc.Extents[0].Egroup
	eg, rev, err := e.l.Egroup(ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return id, eg, rev
}

func (e *env) check(key string, want []byte) {
	e.t.Helper()
	_, rc, err := e.l.Get(context.Background(), "bkt", key, 0, -1)
	if err != nil {
		e.t.Fatalf("get %s: %v", key, err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(got, want) {
		e.t.Fatalf("get %s: wrong bytes (err %v)", key, err)
	}
}

func (e *env) fileExists(dev model.DeviceID, id uint64) bool {
	_, err := os.Stat(filepath.Join(e.dir, string(dev)[len("n1/"):], extent.FileName(id)))
	return err == nil
}

// spare returns a device holding no replica of eg.
func (e *env) spare(eg meta.Egroup, tier model.Tier) model.Replica {
	used := map[model.DeviceID]bool{}
	for _, r := range eg.Replicas {
		used[r.Device] = true
	}
	for id, d := range e.devs {
		if d.Tier() == tier && !used[id] {
			return model.Replica{Device: id, Node: "n1", Tier: tier}
		}
	}
	e.t.Fatalf("no spare %s device", tier)
	return model.Replica{}
}

// TestMoveCopiesVerifiesSwitchesDeletes: a tier move ends with the new
// replica listed and readable, the old one unlisted and deleted, and the
// object's bytes unchanged.
func TestMoveCopiesVerifiesSwitchesDeletes(t *testing.T) {
	e := newEnv(t)
	want := data(1, 300<<10)
	id, eg, rev := e.put("k", want)
	from := eg.Replicas[0].Replica()
	to := e.spare(eg, "ssd")
	res, err := e.act.Execute(context.Background(), Task{Kind: KindTierUp, Egroup: id, ModRev: rev, Bytes: eg.Size,
		Add: []model.Replica{to}, Remove: []model.Replica{from}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Moved != eg.Size || res.Freed != eg.Size {
		t.Fatalf("result %+v for a %d-byte egroup", res, eg.Size)
	}
	after, _, _ := e.l.Egroup(context.Background(), id)
	listed := map[model.DeviceID]bool{}
	for _, r := range after.Replicas {
		listed[r.Device] = true
	}
	if !listed[to.Device] || listed[from.Device] || len(after.Replicas) != 2 {
		t.Fatalf("replicas after the move: %+v", after.Replicas)
	}
	if e.fileExists(from.Device, id) || !e.fileExists(to.Device, id) {
		t.Fatal("the source file was kept or the copy is missing")
	}
	e.check("k", want)
}

// TestStaleMoveLeavesNothing: a move computed from an older revision is
// dropped before any copy; one that goes stale during its copy removes its
// copy and changes nothing.
func TestStaleMoveLeavesNothing(t *testing.T) {
	e := newEnv(t)
	want := data(2, 200<<10)
	id, eg, rev := e.put("k", want)
	to := e.spare(eg, "ssd")
	_, err := e.act.Execute(context.Background(), Task{Kind: KindRecover, Egroup: id, ModRev: rev - 1, Bytes: eg.Size, Add: []model.Replica{to}})
	if !errors.Is(err, ErrStale) {
		t.Fatalf("stale task: %v", err)
	}
	if e.fileExists(to.Device, id) {
		t.Fatal("a stale task copied data")
	}
	// Stale after the copy: a reader marks a replica bad while the copy
	// runs, so the switch's compare fails.
	racing := New(changeDuringCopy{Layer: e.l, mark: eg.Replicas[1].Device}, NewScheduler(Limits{}, 1e12, Signals{}), nil)
	_, err = racing.Execute(context.Background(), Task{Kind: KindRecover, Egroup: id, ModRev: rev, Bytes: eg.Size, Add: []model.Replica{to}})
	if !errors.Is(err, ErrStale) || e.fileExists(to.Device, id) {
		t.Fatalf("move racing a change: %v, copy left behind: %v", err, e.fileExists(to.Device, id))
	}
	after, _, _ := e.l.Egroup(context.Background(), id)
	if len(after.Replicas) != 2 {
		t.Fatalf("a stale move changed the replicas: %+v", after.Replicas)
	}
	e.check("k", want)
}

// changeDuringCopy changes the egroup record right after each copy.
type changeDuringCopy struct {
	*object.Layer
	mark model.DeviceID
}

func (c changeDuringCopy) CopyReplica(ctx context.Context, id uint64, size int64, src, dst model.Replica) error {
	err := c.Layer.CopyReplica(ctx, id, size, src, dst)
	c.Layer.MarkReplicaBad(ctx, id, c.mark)
	return err
}

// TestFailedCopyKeepsTheOldLayout: with every source replica corrupt, the
// move fails, the record is unchanged and no copy is left; the corrupt
// source is reported bad.
func TestFailedCopyKeepsTheOldLayout(t *testing.T) {
	e := newEnv(t)
	id, eg, rev := e.put("k", data(3, 100<<10))
	for _, r := range eg.Replicas {
		p := filepath.Join(e.dir, string(r.Device)[len("n1/"):], extent.FileName(id))
		b, _ := os.ReadFile(p)
		b[len(b)/2] ^= 1
		os.WriteFile(p, b, 0o644)
	}
	to := e.spare(eg, "ssd")
	_, err := e.act.Execute(context.Background(), Task{Kind: KindRecover, Egroup: id, ModRev: rev, Bytes: eg.Size, Add: []model.Replica{to}})
	if err == nil || e.fileExists(to.Device, id) {
		t.Fatalf("copy from corrupt sources: %v; copy left: %v", err, e.fileExists(to.Device, id))
	}
	after, _, _ := e.l.Egroup(context.Background(), id)
	for _, r := range after.Replicas {
		if r.Device == to.Device || !r.Bad {
			t.Fatalf("after a failed copy: %+v", after.Replicas)
		}
	}
}

// TestSchedulerBoundsConcurrency: however many moves are offered, no
// device or link carries more than its limit at once.
func TestSchedulerBoundsConcurrency(t *testing.T) {
	s := NewScheduler(Limits{PerSource: 2, PerDest: 1, PerLink: 3}, 1e12, Signals{})
	ctx := context.Background()
	var maxSrc, maxDst, maxLink atomic.Int64
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := model.Replica{Device: model.DeviceID(fmt.Sprintf("n1/hdd%d", i%2)), Node: "n1"}
			dst := model.Replica{Device: model.DeviceID(fmt.Sprintf("n2/ssd%d", i%4)), Node: "n2"}
			release, err := s.Acquire(ctx, src, dst)
			if err != nil {
				t.Error(err)
				return
			}
			for k, v := range s.InUse() {
				var m *atomic.Int64
				switch k[:3] {
				case "src":
					m = &maxSrc
				case "dst":
					m = &maxDst
				default:
					m = &maxLink
				}
				for cur := m.Load(); int64(v) > cur && !m.CompareAndSwap(cur, int64(v)); cur = m.Load() {
				}
			}
			time.Sleep(time.Millisecond)
			release()
		}()
	}
	wg.Wait()
	if maxSrc.Load() > 2 || maxDst.Load() > 1 || maxLink.Load() > 3 {
		t.Fatalf("limits exceeded: src %d, dst %d, link %d", maxSrc.Load(), maxDst.Load(), maxLink.Load())
	}
	if len(s.InUse()) != 0 {
		t.Fatalf("slots leaked: %v", s.InUse())
	}
	// A cancelled wait returns instead of blocking forever.
	release, _ := s.Acquire(ctx, model.Replica{Device: "a"}, model.Replica{Device: "b"})
	defer release()
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	s2 := NewScheduler(Limits{PerSource: 1, PerDest: 1, PerLink: 1}, 1e12, Signals{})
	r1, _ := s2.Acquire(ctx, model.Replica{Device: "a"}, model.Replica{})
	defer r1()
	if _, err := s2.Acquire(cctx, model.Replica{Device: "a"}, model.Replica{}); err == nil {
		t.Fatal("acquire past the limit did not wait for the context")
	}
}

// TestAdaptiveRate: congestion (a busy device, or client latency above
// twice its baseline) halves the byte rate; quiet raises it by 5 % of the
// maximum, never past it.
func TestAdaptiveRate(t *testing.T) {
	var queue atomic.Int64
	var recent atomic.Int64
	s := NewScheduler(Limits{}, 100e6, Signals{
		QueueLen:     func(model.DeviceID) int { return int(queue.Load()) },
		BusyQueueLen: 4,
		ClientLatency: func() (time.Duration, time.Duration) {
			return time.Duration(recent.Load()), 10 * time.Millisecond
		},
	})
	ctx := context.Background()
	recent.Store(int64(10 * time.Millisecond))
	if _, err := s.Throttle(ctx, 1, "d"); err != nil || s.Rate() != 100e6 {
		t.Fatalf("quiet: rate %.0f, %v", s.Rate(), err)
	}
	queue.Store(9)
	go func() { time.Sleep(150 * time.Millisecond); queue.Store(0) }()
	n, err := s.Throttle(ctx, 1, "d")
	if err != nil || n == 0 || s.Rate() != 50e6 {
		t.Fatalf("busy device: %d back-offs, rate %.0f, %v", n, s.Rate(), err)
	}
	recent.Store(int64(25 * time.Millisecond))
	go func() { time.Sleep(150 * time.Millisecond); recent.Store(int64(12 * time.Millisecond)) }()
	if n, _ := s.Throttle(ctx, 1, "d"); n == 0 || s.Rate() != 25e6 {
		t.Fatalf("slow clients: %d back-offs, rate %.0f", n, s.Rate())
	}
	s.Throttle(ctx, 1, "d")
	if s.Rate() != 30e6 {
		t.Fatalf("recovery: rate %.0f, want 30e6", s.Rate())
	}
}

// TestJobSurvivesARestart: a job cut off mid-way (its runner's context
// ends, as when a Curator master dies) is checkpointed; a new runner over
// the same metadata store resumes it and every move ends done or stale,
// with every object intact.
func TestJobSurvivesARestart(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var tasks []Task
	want := map[string][]byte{}
	for i := range 300 { // more than one checkpoint batch
		k := fmt.Sprintf("k%03d", i)
		want[k] = data(uint64(i), 2000+i)
		if _, err := e.l.Put(ctx, "bkt", k, bytes.NewReader(want[k]), object.PutOptions{Size: int64(len(want[k])), Vector: model.MustParseVector("hdd=2")}); err != nil {
			t.Fatal(err)
		}
	}
	e.l.SealIdle(ctx, -1)
	seen := map[uint64]bool{}
	for k := range want {
		loc, _ := e.l.Locate(ctx, "bkt", k)
		for _, x := range loc.Extents {
			if seen[x.Egroup] {
				continue
			}
			seen[x.Egroup] = true
			eg, rev, err := e.l.Egroup(ctx, x.Egroup)
			if err != nil {
				t.Fatal(err)
			}
			tasks = append(tasks, Task{Kind: KindPlanned, Egroup: x.Egroup, ModRev: rev, Bytes: eg.Size,
				Add: []model.Replica{e.spare(eg, "hdd")}, Remove: []model.Replica{eg.Replicas[0].Replica()}, Rules: []string{"test"}})
		}
	}
	// Pad with no-op seals of the same egroups so the job spans batches.
	for len(tasks) < batchSize+10 {
		tasks = append(tasks, Task{Kind: KindSeal, Egroup: tasks[0].Egroup, ModRev: 1})
	}
	store := NewJobStore(e.kv)
	job := NewJob("job-1", "plan", "test", 42, time.Now(), tasks)
	r1 := &Runner{Actuator: e.act, Store: store, Workers: 1, CheckpointEvery: 10 * time.Millisecond, Owner: "n1"}
	cctx, cancel := context.WithCancel(ctx)
	var done atomic.Int64
	// The master dies after a few moves. The cut happens inside the
	// progress callback, not from a polling goroutine, so a slow machine
	// cannot let the whole job finish before it.
	r1.Run(cctx, job, func(Task, TaskState, Result, error) {
		if done.Add(1) == 3 {
			cancel()
		}
	})
	ids, err := store.Unfinished(ctx)
	if err != nil || len(ids) != 1 {
		t.Fatalf("unfinished after the cut: %v, %v", ids, err)
	}
	saved, err := store.Load(ctx, "job-1")
	if err != nil || len(saved.Tasks) != len(tasks) || saved.Seed != 42 {
		t.Fatalf("load: %v, %d tasks", err, len(saved.Tasks))
	}
	if p := saved.Progress(time.Now()); p.States["done"] == 0 || p.States["pending"] == 0 {
		t.Fatalf("checkpoint after the cut: %v", p.States)
	}
	// A new master over the same store.
	r2 := &Runner{Actuator: New(e.l, NewScheduler(Limits{}, 1e12, Signals{}), nil), Store: store, Workers: 2, Owner: "n2"}
	if err := r2.ResumeUnfinished(ctx); err != nil {
		t.Fatal(err)
	}
	final, err := store.Load(ctx, "job-1")
	if err != nil {
		t.Fatal(err)
	}
	p := final.Progress(time.Now())
	if p.States["pending"] != 0 || p.States["failed"] != 0 || final.finished.IsZero() {
		t.Fatalf("after resuming: %v (errors %v)", p.States, p.Errors)
	}
	if ids, _ := store.Unfinished(ctx); len(ids) != 0 {
		t.Fatalf("still unfinished: %v", ids)
	}
	for k, b := range want {
		e.check(k, b)
	}
	// Every planned move happened: no egroup keeps its first replica.
	for _, tk := range tasks {
		if tk.Kind != KindPlanned {
			continue
		}
		eg, _, _ := e.l.Egroup(ctx, tk.Egroup)
		for _, r := range eg.Replicas {
			if r.Device == tk.Remove[0].Device {
				t.Fatalf("egroup %x still on %s", tk.Egroup, r.Device)
			}
		}
	}
}
