package curator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/actuate"
	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/device"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/placement"
)

// tierEnv is a node whose device set can change across restarts (a new
// disk added), with tiering on and a short hot window.
type tierEnv struct {
	t     *testing.T
	dir   string
	specs []string
	kv    *meta.Pebble
	devs  []*device.Device
	local *object.Local
	l     *object.Layer
	c     *Curator
}

func newTierEnv(t *testing.T, specs ...string) *tierEnv {
	e := &tierEnv{t: t, dir: t.TempDir(), specs: specs}
	e.open()
	e.l.CreateBucket(context.Background(), "bkt", "", model.Vector{})
	return e
}

func (e *tierEnv) open() {
	t := e.t
	e.devs = nil
	for i, s := range e.specs {
		sp, err := device.ParseSpec(fmt.Sprintf(s, filepath.Join(e.dir, fmt.Sprint(i))))
		if err != nil {
			t.Fatal(err)
		}
		d, err := device.Open(model.DeviceID(fmt.Sprintf("n1/%s%d", sp.Tier, i)), sp)
		if err != nil {
			t.Fatal(err)
		}
		d.SetThroughput(100e6*float64(3-sp.Tier.Rank()), 100e6)
		e.devs = append(e.devs, d)
	}
	kv, err := meta.OpenPebble(filepath.Join(e.dir, "meta"))
	if err != nil {
		t.Fatal(err)
	}
	e.kv = kv
	e.local = object.NewLocal("n1", "r1", e.devs)
	// fitness writes new egroups to the fastest tier (Stargate's rule),
	// so the ssd fills and tiering has work to do.
	pol, _ := placement.New(placement.Config{Name: "fitness"})
	e.l, err = object.New(kv, e.local, e.local, object.Options{ExtentMaxBytes: 64 << 10, EgroupMaxBytes: 256 << 10,
		Policy: pol, StatsInterval: 1, AccessWindow: time.Hour, HotReads: decide.DefaultPromoteReads})
	if err != nil {
		t.Fatal(err)
	}
	e.c = New(e.l, e.kv, e.local, pol, nil, nil, Options{Tiering: true, MoveBytesPerSec: 1e12, SealIdleBeforeScan: -1,
		Decide: decide.Options{GarbageGrace: time.Hour}, Tier: decide.TierOptions{HotWindow: time.Hour}})
}

func (e *tierEnv) close() { e.l.Close(); e.kv.Close() }

func (e *tierEnv) put(k string, b []byte, v string) {
	e.t.Helper()
	var vec model.Vector
	if v != "" {
		vec = model.MustParseVector(v)
	}
	if _, err := e.l.Put(context.Background(), "bkt", k, bytesReader(b), object.PutOptions{Size: int64(len(b)), Vector: vec}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *tierEnv) tierUse(t model.Tier) float64 {
	var used, capacity int64
	for _, d := range e.devs {
		if d.Tier() == t {
			used += d.Used()
			capacity += d.Capacity()
		}
	}
	return float64(used) / float64(capacity)
}

func (e *tierEnv) tiersOf(k string) map[model.Tier]int {
	loc, err := e.l.Locate(context.Background(), "bkt", k)
	if err != nil {
		e.t.Fatal(err)
	}
	return loc.Tiers
}

func (e *tierEnv) read(k string, times int) {
	for i := 0; i < times; i++ {
		_, rc, err := e.l.Get(context.Background(), "bkt", k, 0, -1)
		if err != nil {
			e.t.Fatal(err)
		}
		buf := make([]byte, 1<<16)
		for {
			if _, err := rc.Read(buf); err != nil {
				break
			}
		}
	}
	if err := e.l.FlushAccess(context.Background()); err != nil {
		e.t.Fatal(err)
	}
}

func (e *tierEnv) job() *JobRecord {
	e.t.Helper()
	rec, err := e.c.RunJob(context.Background(), "partial", "test")
	if err != nil {
		e.t.Fatal(err)
	}
	if rec.Failed > 0 {
		e.t.Fatalf("failed tasks: %v", rec.Errors)
	}
	return rec
}

// TestTierDownKeepsHotSetOnSSD fills the ssd past f=75 %, touches a hot
// set, and checks the Curator demotes the cold data until the ssd fell by
// about h=15 % while the hot set stays on ssd.
func TestTierDownKeepsHotSetOnSSD(t *testing.T) {
	e := newTierEnv(t, "ssd:%s:8MiB", "hdd:%s:256MiB", "hdd:%s:256MiB")
	defer e.close()
	var keys []string
	for i := 0; e.tierUse(model.TierSSD) < 0.85; i++ {
		k := fmt.Sprintf("k%03d", i)
		e.put(k, data(uint64(i), 200<<10), "any=2")
		keys = append(keys, k)
		if i > 200 {
			t.Fatal("ssd never filled: placement avoids it")
		}
	}
	hot := keys[len(keys)-5:]
	time.Sleep(10 * time.Millisecond)
	for _, k := range hot {
		e.read(k, 4)
	}
	before := e.tierUse(model.TierSSD)
	rec := e.job()
	after := e.tierUse(model.TierSSD)
	t.Logf("ssd %.1f%% -> %.1f%%, tasks %v", 100*before, 100*after, rec.Done)
	if rec.Done[string(decide.KindTierDown)] == 0 {
		t.Fatalf("no demotion with ssd at %.0f%%", 100*before)
	}
	if before-after < 0.14 {
		t.Fatalf("ssd fell by %.1f%%, want ≈ 15%%", 100*(before-after))
	}
	for _, k := range hot {
		if e.tiersOf(k)[model.TierSSD] == 0 {
			t.Fatalf("hot object %s was demoted off ssd", k)
		}
	}
	for i, k := range keys {
		e2 := data(uint64(i), 200<<10)
		_, rc, err := e.l.Get(context.Background(), "bkt", k, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		got := readAll(t, rc)
		if string(got) != string(e2) {
			t.Fatalf("%s changed by tiering", k)
		}
	}
	// An access burst on cold data promotes it back (ssd now has room).
	cold := keys[0]
	if e.tiersOf(cold)[model.TierSSD] != 0 {
		t.Fatalf("coldest object %s still on ssd", cold)
	}
	e.read(cold, 5)
	rec = e.job()
	if rec.Done[string(decide.KindTierUp)] == 0 || e.tiersOf(cold)[model.TierSSD] == 0 {
		t.Fatalf("hot object not promoted: %v, tiers %v", rec.Done, e.tiersOf(cold))
	}
}

// TestDiskBalancingAfterAddingADisk adds an empty disk to a tier whose
// disks are well over m=35 % and checks balancing ends with spread < s.
func TestDiskBalancingAfterAddingADisk(t *testing.T) {
	e := newTierEnv(t, "hdd:%s:16MiB", "hdd:%s:16MiB")
	for i := 0; e.tierUse(model.TierHDD) < 0.6; i++ {
		e.put(fmt.Sprintf("k%03d", i), data(uint64(i), 200<<10), "hdd=1")
	}
	e.close()
	e.specs = append(e.specs, "hdd:%s:16MiB")
	e.open()
	defer e.close()
	spread := func() float64 {
		lo, hi := 1.0, 0.0
		for _, d := range e.devs {
			u := float64(d.Used()) / float64(d.Capacity())
			lo, hi = min(lo, u), max(hi, u)
		}
		return hi - lo
	}
	before := spread()
	var rec *JobRecord
	fired := 0
	for i := 0; i < 3 && spread() >= 0.15; i++ {
		rec = e.job()
		if rec.Plan == nil {
			t.Fatalf("job without a live planning stage: %+v", rec)
		}
		fired += rec.Plan.Fired["disk_balanced"]
		if i == 0 && rec.Plan.CostBefore == rec.Plan.CostAfter {
			t.Fatalf("first plan did not lower the cost: %+v", rec.Plan)
		}
	}
	t.Logf("spread %.1f%% -> %.1f%% (%v, plan %+v)", 100*before, 100*spread(), rec.Done, rec.Plan)
	if spread() >= 0.15 {
		t.Fatalf("spread %.1f%% after balancing, want < 15%%", 100*spread())
	}
	if fired == 0 {
		t.Fatal("balanced, but no move is recorded as lowering disk_balanced")
	}
	// Every object still reads back with its bytes.
	for i := 0; ; i++ {
		k := fmt.Sprintf("k%03d", i)
		_, rc, err := e.l.Get(context.Background(), "bkt", k, 0, -1)
		if errors.Is(err, object.ErrNoSuchKey) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, rc); !bytes.Equal(got, data(uint64(i), 200<<10)) {
			t.Fatalf("%s changed by balancing", k)
		}
	}
	// No balancing when the mean is low: a fresh tier with one busy disk.
	e2 := newTierEnv(t, "hdd:%s:256MiB", "hdd:%s:256MiB")
	defer e2.close()
	e2.put("x", data(1, 1<<20), "hdd=1")
	if r := e2.job(); r.Done[string(actuate.KindPlanned)] != 0 {
		t.Fatalf("balanced a nearly empty tier: %v", r.Done)
	}
}

// TestHotDataPromotedWithoutAScan: an object on hdd read promote_reads
// times climbs to the ssd added since, by the master's event-driven
// promotion — the schedules are hours away, so no scan runs. The moved
// data reads back intact.
func TestHotDataPromotedWithoutAScan(t *testing.T) {
	e := newTierEnv(t, "hdd:%s:64MiB")
	want := data(7, 100<<10)
	e.put("hot", want, "any=1")
	e.l.SealIdle(context.Background(), -1) // its own egroup
	e.put("cold", data(8, 100<<10), "any=1")
	e.l.SealIdle(context.Background(), -1)
	e.close()
	e.specs = append(e.specs, "ssd:%s:64MiB")
	e.open()
	defer e.close()
	e.c.opts.PartialEvery, e.c.opts.FullEvery, e.c.opts.PollEvery = 24*time.Hour, 24*time.Hour, 20*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.c.Run(ctx) }()
	defer func() { cancel(); <-done }()

	e.read("hot", decide.DefaultPromoteReads)
	e.read("cold", 1)
	deadline := time.Now().Add(20 * time.Second)
	for e.tiersOf("hot")[model.TierSSD] == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("hot object not promoted: tiers %v", e.tiersOf("hot"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if e.tiersOf("cold")[model.TierSSD] != 0 {
		t.Fatalf("an object read once was promoted: %v", e.tiersOf("cold"))
	}
	var hist []JobRecord
	for len(hist) == 0 && time.Now().Before(deadline) { // the record is saved after the move
		var err error
		if hist, err = e.c.History(context.Background(), 10); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, r := range hist {
		if r.Kind != "promote" {
			t.Fatalf("a %s job (%s) ran; promotion must not wait for a scan", r.Kind, r.Trigger)
		}
	}
	if len(hist) == 0 || hist[0].Done[string(decide.KindTierUp)] != 1 {
		t.Fatalf("history %+v, want one promotion job with one tier-up", hist)
	}
	_, rc, err := e.l.Get(context.Background(), "bkt", "hot", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, rc); string(got) != string(want) {
		t.Fatal("promoted object reads back changed")
	}
	// The request is consumed.
	items, err := e.kv.Scan(context.Background(), []byte(meta.PrefixHot), meta.PrefixEnd([]byte(meta.PrefixHot)), 0)
	if err != nil || len(items) != 0 {
		t.Fatalf("promotion requests left: %d (%v)", len(items), err)
	}
}

// TestMovesPastTheTimeLimitWaitInNodeQueues: the tier-downs a job could
// not start within its time limit go to the node's durable queue; the
// next job plans nothing else for those egroups; the node's worker runs
// them and the tier ends below its threshold.
func TestMovesPastTheTimeLimitWaitInNodeQueues(t *testing.T) {
	e := newTierEnv(t, "ssd:%s:8MiB", "hdd:%s:1GiB", "hdd:%s:1GiB")
	defer e.close()
	for i := 0; i < 10; i++ {
		e.put(fmt.Sprintf("k%d", i), data(uint64(i), 700<<10), "any=1")
	}
	ctx := context.Background()
	e.c.opts.NodeQueues, e.c.opts.JobTimeLimit = true, time.Nanosecond
	e.c.QueueWorker().Node = "n1"
	rec, err := e.c.RunJob(ctx, "partial", "test")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Queued == 0 || rec.Done["tier-down"] != 0 {
		t.Fatalf("job past its limit: queued %d, done %v (want everything queued)", rec.Queued, rec.Done)
	}
	counts, err := e.c.Queues().Counts(ctx)
	if err != nil || counts["n1"] != rec.Queued {
		t.Fatalf("queue counts %v (%v), job queued %d", counts, err, rec.Queued)
	}
	again, err := e.c.RunJob(ctx, "partial", "test")
	if err != nil {
		t.Fatal(err)
	}
	if again.Held == 0 || again.Done["tier-down"] != 0 {
		t.Fatalf("second job: held %d, done %v, queued %d: it should leave the queued egroups alone", again.Held, again.Done, again.Queued)
	}
	if c, _ := e.c.Queues().Counts(ctx); c["n1"] != rec.Queued+again.Queued {
		t.Fatalf("queue %v after the second job, want %d", c, rec.Queued+again.Queued)
	}
	queued := rec.Queued + again.Queued
	n, err := e.c.QueueWorker().Drain(ctx)
	if err != nil || n != queued {
		t.Fatalf("drain: %d, %v; want %d", n, err, queued)
	}
	if e.tierUse("ssd") > 0.75 {
		t.Fatalf("ssd at %.0f%% after the queue ran", 100*e.tierUse("ssd"))
	}
	if c, _ := e.c.Queues().Counts(ctx); len(c) != 0 {
		t.Fatalf("queue after drain: %v", c)
	}
	e.c.opts.JobTimeLimit = time.Minute
	last, err := e.c.RunJob(ctx, "partial", "test")
	if err != nil {
		t.Fatal(err)
	}
	if last.Planned["tier-down"] != 0 || last.Held != 0 {
		t.Fatalf("after the queue ran: planned %v, held %d", last.Planned, last.Held)
	}
	for i := 0; i < 10; i++ {
		_, rc, err := e.l.Get(ctx, "bkt", fmt.Sprintf("k%d", i), 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, data(uint64(i), 700<<10)) {
			t.Fatalf("k%d: wrong bytes after the queued moves (%v)", i, err)
		}
	}
}
