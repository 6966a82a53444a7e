package curator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/actuate"
	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/device"
	"github.com/terrace-storage/terrace/internal/extent"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/placement"
)

type env struct {
	t     *testing.T
	local *object.Local
	kv    meta.KV
	l     *object.Layer
	c     *Curator
	devs  []*device.Device
}

func newEnv(t *testing.T, specs ...string) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{t: t}
	for i, s := range specs {
		sp, err := device.ParseSpec(fmt.Sprintf(s, filepath.Join(dir, fmt.Sprint(i))))
		if err != nil {
			t.Fatal(err)
		}
		d, err := device.Open(model.DeviceID(fmt.Sprintf("n1/%s%d", sp.Tier, i)), sp)
		if err != nil {
			t.Fatal(err)
		}
		d.SetThroughput(100e6, 100e6)
		e.devs = append(e.devs, d)
	}
	kv, err := meta.OpenPebble(filepath.Join(dir, "meta"))
	if err != nil {
		t.Fatal(err)
	}
	e.local = object.NewLocal("n1", "r1", e.devs)
	pol, _ := placement.New(placement.Config{Name: "moop"})
	e.l, err = object.New(kv, e.local, e.local, object.Options{ExtentMaxBytes: 64 << 10, EgroupMaxBytes: 512 << 10, Policy: pol, StatsInterval: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.l.Close(); kv.Close() })
	e.kv = kv
	e.c = New(e.l, kv, e.local, pol, nil, nil, Options{
		Decide: decide.Options{GarbageGrace: time.Nanosecond, NodeDownAfter: time.Nanosecond},
		Scrub:  true, MoveBytesPerSec: 1e12, SealIdleBeforeScan: -1,
	})
	e.l.CreateBucket(context.Background(), "bkt", "", model.Vector{})
	return e
}

func data(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 3))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func (e *env) put(key string, b []byte, v string) {
	e.t.Helper()
	if _, err := e.l.Put(context.Background(), "bkt", key, bytes.NewReader(b), object.PutOptions{Size: int64(len(b)), Vector: model.MustParseVector(v)}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) check(key string, want []byte) {
	e.t.Helper()
	_, rc, err := e.l.Get(context.Background(), "bkt", key, 0, -1)
	if err != nil {
		e.t.Fatalf("get %s: %v", key, err)
	}
	got, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(got, want) {
		e.t.Fatalf("get %s: wrong bytes (err %v)", key, err)
	}
}

func (e *env) run(kind string) *JobRecord {
	e.t.Helper()
	rec, err := e.c.RunJob(context.Background(), kind, "test")
	if err != nil {
		e.t.Fatal(err)
	}
	if len(rec.Dangling) > 0 {
		e.t.Fatalf("dangling references: %v", rec.Dangling)
	}
	return rec
}

func TestSpaceReclamation(t *testing.T) {
	e := newEnv(t, "ssd:%s:1GiB", "hdd:%s:1GiB", "hdd:%s:1GiB")
	ctx := context.Background()
	objs := map[string][]byte{}
	for i := 0; i < 120; i++ {
		k := fmt.Sprintf("k%03d", i)
		objs[k] = data(uint64(i), 1000+i*997%90000)
		e.put(k, objs[k], "ssd=1,hdd=1")
	}
	for i := 0; i < 120; i += 2 {
		k := fmt.Sprintf("k%03d", i)
		if err := e.l.Delete(ctx, "bkt", k); err != nil {
			t.Fatal(err)
		}
		delete(objs, k)
	}
	// Overwrites make garbage too.
	for i := 1; i < 20; i += 2 {
		k := fmt.Sprintf("k%03d", i)
		objs[k] = data(uint64(i+1000), 5000)
		e.put(k, objs[k], "ssd=1,hdd=1")
	}
	first := e.run("full")
	t.Logf("before: live %d garbage %d", first.Stats.LiveBytes, first.Stats.GarbageBytes)
	if first.Stats.GarbageBytes == 0 {
		t.Fatal("no garbage seen after deleting half the objects")
	}
	var last *JobRecord
	for pass := 0; pass < 4; pass++ {
		last = e.run("full")
	}
	used := last.Stats.LiveBytes + last.Stats.GarbageBytes
	ratio := float64(last.Stats.GarbageBytes) / float64(used)
	t.Logf("after: live %d garbage %d (%.2f%%)", last.Stats.LiveBytes, last.Stats.GarbageBytes, 100*ratio)
	if ratio >= 0.05 {
		t.Fatalf("garbage %.1f%% of used space after reclamation, want < 5%%", 100*ratio)
	}
	for k, b := range objs {
		e.check(k, b)
	}
	// Device usage follows: bytes on disk close to live bytes × replicas.
	var onDisk int64
	for _, d := range e.devs {
		onDisk += d.Used()
	}
	if onDisk > 2*last.Stats.LiveBytes*11/10+4096 {
		t.Fatalf("devices hold %d bytes for %d live bytes × 2 replicas", onDisk, last.Stats.LiveBytes)
	}
}

func corrupt(t *testing.T, e *env, eg uint64, dev model.DeviceID) {
	st, _ := e.local.Store(dev)
	p := filepath.Join(st.Device().Spec().Path, extent.FileName(eg))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestScrubFindsAndRepairsCorruption(t *testing.T) {
	e := newEnv(t, "ssd:%s:1GiB", "hdd:%s:1GiB", "hdd:%s:1GiB")
	ctx := context.Background()
	objs := map[string][]byte{}
	for i := 0; i < 120; i++ {
		k := fmt.Sprintf("k%03d", i)
		objs[k] = data(uint64(i), 100_000+i)
		e.put(k, objs[k], "ssd=1,hdd=1")
	}
	e.run("partial") // seals nothing (writer alive) but exercises the path
	// Seal everything by restart-like recovery so all egroups are scrubbable.
	if _, err := e.l.Recover(ctx, e.local); err != nil {
		t.Fatal(err)
	}
	rep, _ := e.l.Report(ctx)
	_ = rep
	// Corrupt 20 distinct replicas.
	items, _ := e.kv.Scan(ctx, []byte(meta.PrefixEgroup), meta.PrefixEnd([]byte(meta.PrefixEgroup)), 0)
	corrupted := 0
	for _, it := range items {
		if corrupted == 20 {
			break
		}
		id, _ := meta.ParseID(it.Key)
		var eg meta.Egroup
		meta.Decode(it.Value, &eg)
		if eg.Size == 0 {
			continue
		}
		corrupt(t, e, id, eg.Replicas[corrupted%len(eg.Replicas)].Device)
		corrupted++
	}
	if corrupted < 20 {
		t.Fatalf("only %d egroups to corrupt", corrupted)
	}
	rec := e.run("full")
	if rec.BadFound != 20 {
		t.Fatalf("scrub found %d bad replicas, want 20", rec.BadFound)
	}
	rec = e.run("partial")
	if rec.Done[string(decide.KindRecover)] != 20 {
		t.Fatalf("recovered %v, want 20 recover tasks (errors %v)", rec.Done, rec.Errors)
	}
	again := e.run("full")
	if again.BadFound != 0 || again.Stats.BadReplicas != 0 || again.Stats.UnderReplicated != 0 {
		t.Fatalf("after repair: bad found %d, bad marked %d, under-replicated %d", again.BadFound, again.Stats.BadReplicas, again.Stats.UnderReplicated)
	}
	for k, b := range objs {
		e.check(k, b)
	}
}

func TestDeviceFailureRecovery(t *testing.T) {
	e := newEnv(t, "ssd:%s:1GiB", "hdd:%s:1GiB", "hdd:%s:1GiB", "hdd:%s:1GiB")
	ctx := context.Background()
	objs := map[string][]byte{}
	for i := 0; i < 40; i++ {
		k := fmt.Sprintf("k%03d", i)
		objs[k] = data(uint64(i), 30_000)
		e.put(k, objs[k], "hdd=2")
	}
	e.l.Recover(ctx, e.local) // seal open egroups
	loc, _ := e.l.Locate(ctx, "bkt", "k000")
	var failed *device.Device
	for _, d := range e.devs {
		if d.ID() == loc.Extents[0].Replicas[0].Device {
			failed = d
		}
	}
	failed.MarkFailed()
	rec := e.run("partial")
	if rec.Done[string(decide.KindRecover)] == 0 {
		t.Fatalf("no recovery after device failure: %+v", rec)
	}
	after := e.run("partial")
	if after.Stats.UnderReplicated != 0 {
		t.Fatalf("%d egroups still under-replicated", after.Stats.UnderReplicated)
	}
	for k, b := range objs {
		e.check(k, b)
		loc, _ := e.l.Locate(ctx, "bkt", k)
		for _, x := range loc.Extents {
			for _, r := range x.Replicas {
				if r.Device == failed.ID() {
					t.Fatalf("%s still has a replica on the failed device", k)
				}
			}
		}
	}
}

func TestStaleTaskIsDropped(t *testing.T) {
	e := newEnv(t, "ssd:%s:1GiB", "hdd:%s:1GiB", "hdd:%s:1GiB", "hdd:%s:1GiB")
	ctx := context.Background()
	e.put("k", data(1, 50_000), "hdd=2")
	e.l.Recover(ctx, e.local)
	loc, _ := e.l.Locate(ctx, "bkt", "k")
	for _, d := range e.devs {
		if d.ID() == loc.Extents[0].Replicas[0].Device {
			d.MarkFailed()
		}
	}
	res, err := e.c.scan(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	tasks, _, _ := decide.Plan(e.c.snapshotFor(), res.egroups, e.c.policy, e.c.opts.Decide, rand.New(rand.NewPCG(1, 1)), false)
	if len(tasks) == 0 {
		t.Fatal("no task planned")
	}
	// A concurrent change to the egroup (here: the object is overwritten
	// and a replica marked bad) moves its revision.
	e.put("k", data(2, 50_000), "hdd=2")
	e.l.MarkReplicaBad(ctx, tasks[0].Egroup, loc.Extents[0].Replicas[1].Device)
	_, err = e.c.Actuator().Execute(ctx, actuate.FromDecide(tasks[0]))
	if !errors.Is(err, actuate.ErrStale) {
		t.Fatalf("task after concurrent change: %v, want stale", err)
	}
	e.check("k", data(2, 50_000))
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

func readAll(t *testing.T, r io.Reader) []byte {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// An open egroup with a replica on a failed device belongs to its writer:
// the failure's scan counts it under-replicated but cannot copy it. The
// Curator must come back for it soon (RecheckAfter), not at the next
// periodic partial scan an hour later, and stop re-checking once a scan
// finds everything protected.
func TestUnderReplicatedOpenEgroupIsRechecked(t *testing.T) {
	e := newEnv(t, "ssd:%s:1GiB", "hdd:%s:1GiB", "hdd:%s:1GiB", "hdd:%s:1GiB")
	e.c.opts.SealIdleBeforeScan = time.Hour // the egroup was written just now: not idle
	ctx := context.Background()
	objs := map[string][]byte{}
	for i := 0; i < 4; i++ {
		k := fmt.Sprintf("k%03d", i)
		objs[k] = data(uint64(i), 30_000)
		e.put(k, objs[k], "hdd=2")
	}
	loc, _ := e.l.Locate(ctx, "bkt", "k000")
	if loc.Extents[0].State != "open" {
		t.Fatalf("egroup state %q, want open (the writer still owns it)", loc.Extents[0].State)
	}
	for _, d := range e.devs {
		if d.ID() == loc.Extents[0].Replicas[0].Device {
			d.MarkFailed()
		}
	}
	start := time.Now()
	clock := start
	e.c.now = func() time.Time { return clock }
	e.c.mu.Lock()
	e.c.last["full"], e.c.last["partial"] = start, start
	e.c.mu.Unlock()
	if kind, why := e.c.due(); kind != "partial" || !strings.Contains(why, "failed") {
		t.Fatalf("after the failure: due %q (%s), want the failure's partial scan", kind, why)
	}
	rec := e.run("partial")
	if rec.Stats.UnderReplicated == 0 || rec.Done[string(decide.KindRecover)] != 0 {
		t.Fatalf("failure scan: %d under-replicated, %v done; want the open egroup seen but left to its writer", rec.Stats.UnderReplicated, rec.Done)
	}
	if kind, why := e.c.due(); kind != "" {
		t.Fatalf("right after the job: due %q (%s)", kind, why)
	}
	clock = start.Add(e.c.opts.RecheckAfter + time.Second)
	kind, why := e.c.due()
	if kind != "partial" || !strings.Contains(why, "re-check") {
		t.Fatalf("%s after a job left under-replication: due %q (%s), want a re-check partial scan (periodic one is %s away)",
			e.c.opts.RecheckAfter+time.Second, kind, why, e.c.opts.PartialEvery)
	}
	// The writer lets go (sealing, as idle sealing would), the re-check
	// copies it, the next one confirms and disarms.
	if _, err := e.l.Recover(ctx, e.local); err != nil {
		t.Fatal(err)
	}
	rec = e.run("partial")
	if rec.Done[string(decide.KindRecover)] == 0 {
		t.Fatalf("re-check did not recover: %+v", rec)
	}
	if e.c.recheckAt.IsZero() {
		t.Fatal("no confirming re-check armed after a job that saw under-replication")
	}
	rec = e.run("partial")
	if rec.Stats.UnderReplicated != 0 {
		t.Fatalf("%d egroups under-replicated after recovery", rec.Stats.UnderReplicated)
	}
	if !e.c.recheckAt.IsZero() {
		t.Fatalf("re-check still armed at %s after a clean scan", e.c.recheckAt)
	}
	for k, b := range objs {
		e.check(k, b)
	}
}
