package object

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/terrace-storage/terrace/internal/extent"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

// gatedIO lets a test hold replica appends (to make writers queue behind
// a batch) and fail the batched appends to one device.
type gatedIO struct {
	*Local
	mu sync.Mutex
	// gate, when set, holds every AppendSync until it is closed; each
	// held call first sends on entered.
	gate    chan struct{}
	entered chan struct{}
	// failBatchesOn fails appends of more than one small extent to this
	// device.
	failBatchesOn model.DeviceID
	// hangBatchesOn holds appends of more than one small extent to this
	// device until their context ends (a peer that stopped answering).
	hangBatchesOn model.DeviceID
	appends       atomic.Int64
}

// Truncate refuses an ended context, as a remote replica's RPC does, and
// on the device whose batch appends hang it hangs too (the same peer).
func (g *gatedIO) Truncate(ctx context.Context, r model.Replica, id uint64, size int64) error {
	g.mu.Lock()
	hang := g.hangBatchesOn
	g.mu.Unlock()
	if r.Device == hang {
		<-ctx.Done()
		return fmt.Errorf("injected hung truncate: %w", ctx.Err())
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return g.Local.Truncate(ctx, r, id, size)
}

func (g *gatedIO) AppendSync(ctx context.Context, r model.Replica, id uint64, off int64, enc []byte) error {
	g.appends.Add(1)
	g.mu.Lock()
	gate, fail := g.gate, g.failBatchesOn
	g.mu.Unlock()
	if gate != nil {
		g.entered <- struct{}{}
		<-gate
	}
	if r.Device == fail && int64(len(enc)) > extent.EncodedLen(4096) {
		return errors.New("injected batch append failure")
	}
	g.mu.Lock()
	hang := g.hangBatchesOn
	g.mu.Unlock()
	if r.Device == hang && int64(len(enc)) > extent.EncodedLen(4096) {
		<-ctx.Done()
		return fmt.Errorf("injected hung append: %w", ctx.Err())
	}
	return g.Local.AppendSync(ctx, r, id, off, enc)
}

func (g *gatedIO) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gate = make(chan struct{})
	g.entered = make(chan struct{}, 64)
}

// next lets the held appends go and holds the following ones.
func (g *gatedIO) next() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.gate)
	g.gate = make(chan struct{})
	g.entered = make(chan struct{}, 64)
}

func (g *gatedIO) waitEntered(n int) {
	g.mu.Lock()
	ch := g.entered
	g.mu.Unlock()
	for i := 0; i < n; i++ {
		<-ch
	}
}

func (g *gatedIO) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.gate)
	g.gate = nil
}

// batchEnv is a layer over gatedIO with one bucket of vector ssd=1,hdd=1
// and one object written (so the pool holds a recorded open egroup).
type batchEnv struct {
	*env
	g   *gatedIO
	l   *Layer
	vec model.Vector
}

func newBatchEnv(t *testing.T, kv func(*meta.Pebble) meta.KV, opts Options) *batchEnv {
	e := newEnv(t)
	e.l.Close()
	e.l = nil
	t.Cleanup(func() { e.kv.Close() })
	g := &gatedIO{Local: e.local}
	var store meta.KV = e.kv
	if kv != nil {
		store = kv(e.kv)
	}
	opts.StatsInterval = 1
	l, err := New(store, g, e.local, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	b := &batchEnv{env: e, g: g, l: l, vec: model.MustParseVector("ssd=1,hdd=1")}
	if err := l.CreateBucket(context.Background(), "bkt", "", b.vec); err != nil {
		t.Fatal(err)
	}
	if err := b.put("warm", 0); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *batchEnv) put(key string, seed uint64) error {
	data := payload(seed, 4096)
	_, err := b.l.Put(context.Background(), "bkt", key, bytes.NewReader(data), PutOptions{Size: int64(len(data))})
	return err
}

// warmHDD returns the egroup of the warm-up write and its hdd replica.
func (b *batchEnv) warmHDD(t *testing.T) (uint64, model.DeviceID) {
	t.Helper()
	warm, err := b.l.Locate(context.Background(), "bkt", "warm")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range warm.Extents[0].Replicas {
		if r.Tier == model.TierHDD {
			return warm.Extents[0].Egroup, r.Device
		}
	}
	t.Fatal("the warm-up write has no hdd replica")
	return 0, ""
}

// checkReplicaFiles checks that every replica file of egroup id is size
// bytes long: a failed batch's bytes were cut off.
func (b *batchEnv) checkReplicaFiles(t *testing.T, eg meta.Egroup, id uint64, size int64) {
	t.Helper()
	for _, r := range eg.Replicas {
		st, _ := b.local.Store(r.Device)
		fi, err := os.Stat(filepath.Join(st.Device().Spec().Path, extent.FileName(id)))
		if err != nil {
			t.Fatalf("replica on %s: %v", r.Device, err)
		}
		if fi.Size() != size {
			t.Fatalf("replica on %s is %d bytes, want %d (the failed batch cut off)", r.Device, fi.Size(), size)
		}
	}
}

// queued is how many writers wait behind the batch being written.
func (b *batchEnv) queued() int {
	a := b.l.appenderFor(b.vec, "")
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.queue)
}

// putHeldBatch starts a leader whose batch is held at the gate, queues
// n more writers behind it, then opens the gate (after between, if
// set) and returns every writer's error.
func (b *batchEnv) putHeldBatch(t *testing.T, n int, between func()) []error {
	t.Helper()
	b.g.hold()
	errs := make([]error, n+1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); errs[0] = b.put("k00", 100) }()
	b.g.waitEntered(2) // both replicas of the leader's batch
	for i := 1; i <= n; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = b.put(fmt.Sprintf("k%02d", i), uint64(100+i)) }()
	}
	for deadline := time.Now().Add(10 * time.Second); b.queued() < n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d writers queued behind the held batch", b.queued(), n)
		}
		time.Sleep(time.Millisecond)
	}
	if between != nil {
		between()
	}
	b.g.open()
	wg.Wait()
	return errs
}

func (b *batchEnv) checkAll(t *testing.T, l *Layer, n int) {
	t.Helper()
	for i := 0; i <= n; i++ {
		key := fmt.Sprintf("k%02d", i)
		if got, err := readAll(t, l, key); err != nil || !bytes.Equal(got, payload(uint64(100+i), 4096)) {
			t.Fatalf("%s: %v", key, err)
		}
	}
	if got, err := readAll(t, l, "warm"); err != nil || !bytes.Equal(got, payload(0, 4096)) {
		t.Fatalf("warm: %v", err)
	}
}

// TestBatchSharesOneAppend: writers that arrive while a batch is being
// written share the next one: one fsynced append per replica for all of
// them, their extents back to back in one egroup, every object intact
// before and after a restart.
func TestBatchSharesOneAppend(t *testing.T) {
	b := newBatchEnv(t, nil, Options{})
	before := b.g.appends.Load()
	const n = 15
	for i, err := range b.putHeldBatch(t, n, nil) {
		if err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	if got := b.g.appends.Load() - before; got != 4 {
		t.Fatalf("%d replica appends for 16 PUTs in two batches, want 4 (2 replicas × 2 batches)", got)
	}
	ctx := context.Background()
	warm, _ := b.l.Locate(ctx, "bkt", "warm")
	id := warm.Extents[0].Egroup
	offs := map[int64]bool{}
	for i := 0; i <= n; i++ {
		loc, err := b.l.Locate(ctx, "bkt", fmt.Sprintf("k%02d", i))
		if err != nil {
			t.Fatal(err)
		}
		if x := loc.Extents[0]; x.Egroup != id {
			t.Fatalf("k%02d in egroup %s, want the pool's %s", i, meta.FormatID(x.Egroup), meta.FormatID(id))
		}
		offs[loc.Extents[0].EgroupOff] = true
	}
	per := extent.EncodedLen(4096)
	for i := int64(1); i <= n+1; i++ {
		if !offs[i*per] {
			t.Fatalf("no extent at offset %d: extents are not back to back (%v)", i*per, offs)
		}
	}
	checkTails(t, b.kv)
	b.checkAll(t, b.l, n)
	l2 := restartLayer(t, b.env, b.l)
	b.checkAll(t, l2, n)
	checkTails(t, b.kv)
}

// TestBatchReplicaFailsMidBatch: one replica fails a batch's append.
// Every writer of the batch is re-placed together on a fresh egroup
// without that device, the failed egroup is cut back to its earlier
// batches and sealed, and nothing acknowledged is lost.
func TestBatchReplicaFailsMidBatch(t *testing.T) {
	b := newBatchEnv(t, nil, Options{})
	ctx := context.Background()
	id, hdd := b.warmHDD(t)
	b.g.failBatchesOn = hdd
	const n = 15
	for i, err := range b.putHeldBatch(t, n, nil) {
		if err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	eg, _ := egroupRecord(t, b.kv, id)
	per := extent.EncodedLen(4096)
	if eg.State != meta.EgroupSealed || eg.Size != 2*per {
		t.Fatalf("failed egroup: state %v size %d, want sealed at %d (the warm-up and the leader's batch)", eg.State, eg.Size, 2*per)
	}
	b.checkReplicaFiles(t, eg, id, 2*per)
	for i := 1; i <= n; i++ {
		loc, _ := b.l.Locate(ctx, "bkt", fmt.Sprintf("k%02d", i))
		for _, r := range loc.Extents[0].Replicas {
			if r.Device == hdd {
				t.Fatalf("k%02d has a replica on %s, which failed its batch", i, hdd)
			}
		}
	}
	checkTails(t, b.kv)
	b.checkAll(t, b.l, n)
	l2 := restartLayer(t, b.env, b.l)
	b.checkAll(t, l2, n)
}

// TestBatchHungReplicaCutOffAfterTheBatchTimedOut: a batch whose append
// to one replica hangs until the batch's time runs out is undone on the
// replica that took it, although the batch's context has ended by then:
// the failed batch's bytes must not stay past the size the egroup is
// sealed at (a remote replica's truncate refuses an ended context).
func TestBatchHungReplicaCutOffAfterTheBatchTimedOut(t *testing.T) {
	defer func(d, u time.Duration) { batchTimeout, undoTimeout = d, u }(batchTimeout, undoTimeout)
	batchTimeout, undoTimeout = 300*time.Millisecond, 300*time.Millisecond
	b := newBatchEnv(t, nil, Options{})
	id, hdd := b.warmHDD(t)
	b.g.mu.Lock()
	b.g.hangBatchesOn = hdd
	b.g.mu.Unlock()
	const n = 5
	errs := b.putHeldBatch(t, n, nil)
	if errs[0] != nil {
		t.Fatalf("the leader (alone in its batch): %v", errs[0])
	}
	eg, _ := egroupRecord(t, b.kv, id)
	per := extent.EncodedLen(4096)
	if eg.State != meta.EgroupSealed || eg.Size != 2*per {
		t.Fatalf("failed egroup: state %v size %d, want sealed at %d (the warm-up and the leader)", eg.State, eg.Size, 2*per)
	}
	b.checkReplicaFiles(t, eg, id, 2*per)
	b.g.mu.Lock()
	b.g.hangBatchesOn = ""
	b.g.mu.Unlock()
	for i := 1; i <= n; i++ {
		if errs[i] != nil {
			continue // the batch ran out of time: refused, not lost
		}
		key := fmt.Sprintf("k%02d", i)
		if got, err := readAll(t, b.l, key); err != nil || !bytes.Equal(got, payload(uint64(100+i), 4096)) {
			t.Fatalf("%s acknowledged but reads %v", key, err)
		}
	}
	checkTails(t, b.kv)
}

// TestBatchUndoNotHeldByAHungReplica: the undo of a failed batch cuts
// every replica back at once, so one replica whose truncate hangs as its
// append did (first in the egroup's replica list) does not use up the
// time of the others, which would then be left long.
func TestBatchUndoNotHeldByAHungReplica(t *testing.T) {
	defer func(d, u time.Duration) { batchTimeout, undoTimeout = d, u }(batchTimeout, undoTimeout)
	batchTimeout, undoTimeout = 300*time.Millisecond, 300*time.Millisecond
	b := newBatchEnv(t, nil, Options{})
	id, _ := b.warmHDD(t)
	eg, _ := egroupRecord(t, b.kv, id)
	hung := eg.Replicas[0].Device
	b.g.mu.Lock()
	b.g.hangBatchesOn = hung
	b.g.mu.Unlock()
	errs := b.putHeldBatch(t, 5, nil)
	if errs[0] != nil {
		t.Fatalf("the leader (alone in its batch): %v", errs[0])
	}
	b.g.mu.Lock()
	b.g.hangBatchesOn = ""
	b.g.mu.Unlock()
	eg, _ = egroupRecord(t, b.kv, id)
	per := extent.EncodedLen(4096)
	for _, r := range eg.Replicas {
		if r.Device == hung {
			continue // its peer never answered: cut by recovery, not here
		}
		st, _ := b.local.Store(r.Device)
		fi, err := os.Stat(filepath.Join(st.Device().Spec().Path, extent.FileName(id)))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() != 2*per {
			t.Fatalf("replica on %s is %d bytes, want %d: the hung replica's truncate held up this one", r.Device, fi.Size(), 2*per)
		}
	}
}

// raceRecordChange runs a held batch of n writers behind a leader whose
// batch commits first; change then alters the egroup's record while the
// queued writers' batch is held in its appends (their slots in the egroup
// taken, their commits not yet tried).
func (b *batchEnv) raceRecordChange(t *testing.T, n int, change func(id uint64)) (uint64, []error) {
	ctx := context.Background()
	warm, _ := b.l.Locate(ctx, "bkt", "warm")
	id := warm.Extents[0].Egroup
	errs := b.putHeldBatch(t, n, func() {
		b.g.next()
		b.g.waitEntered(2)
		for deadline := time.Now().Add(10 * time.Second); ; {
			if _, err := b.l.Head(ctx, "bkt", "k00"); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the leader's PUT did not commit")
			}
			time.Sleep(time.Millisecond)
		}
		change(id)
	})
	return id, errs
}

// checkMovedOut checks that writers 1..n all succeeded with their extents
// outside egroup id, that id ends sealed at the leader's committed end,
// and that every object reads back, before and after a restart.
func (b *batchEnv) checkMovedOut(t *testing.T, id uint64, n int, errs []error) meta.Egroup {
	t.Helper()
	ctx := context.Background()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	for i := 1; i <= n; i++ {
		loc, err := b.l.Locate(ctx, "bkt", fmt.Sprintf("k%02d", i))
		if err != nil {
			t.Fatal(err)
		}
		if loc.Extents[0].Egroup == id {
			t.Fatalf("k%02d committed into egroup %s after its record changed", i, meta.FormatID(id))
		}
	}
	eg, _ := egroupRecord(t, b.kv, id)
	if per := extent.EncodedLen(4096); eg.State != meta.EgroupSealed || eg.Size != 2*per {
		t.Fatalf("egroup %s: state %v size %d, want sealed at %d (the warm-up and the leader)", meta.FormatID(id), eg.State, eg.Size, 2*per)
	}
	checkTails(t, b.kv)
	b.checkAll(t, b.l, n)
	l2 := restartLayer(t, b.env, b.l)
	b.checkAll(t, l2, n)
	checkTails(t, b.kv)
	return eg
}

// TestBatchSealRacesCommit: the Curator seals the appender's egroup (its
// writer looked down) at its committed length while a batch is being
// written into it. The batch's writers must not raise the length of an
// egroup someone else sealed (a peer's recovery may already have cut its
// replica to it): each writes its extent again, under the ID its object
// record names, into a fresh egroup whose tail range covers it. Nothing
// acknowledged is lost, before or after a restart whose recovery cuts
// sealed egroups to their size.
func TestBatchSealRacesCommit(t *testing.T) {
	b := newBatchEnv(t, nil, Options{})
	ctx := context.Background()
	id, errs := b.raceRecordChange(t, 15, func(id uint64) {
		_, rev := egroupRecord(t, b.kv, id)
		if err := b.l.SealEgroup(ctx, id, rev); err != nil {
			t.Errorf("seal: %v", err)
		}
	})
	b.checkMovedOut(t, id, 15, errs)
}

// TestBatchBadMarkRacesCommit: a reader marks one replica of the
// appender's egroup bad while a batch is being written into it. The
// batch's writers move their extents to a fresh egroup; the marked one is
// sealed at its committed end, keeping the mark.
func TestBatchBadMarkRacesCommit(t *testing.T) {
	b := newBatchEnv(t, nil, Options{})
	ctx := context.Background()
	var hdd model.DeviceID
	id, errs := b.raceRecordChange(t, 15, func(id uint64) {
		eg, _ := egroupRecord(t, b.kv, id)
		for _, r := range eg.Replicas {
			if r.Tier == model.TierHDD {
				hdd = r.Device
			}
		}
		b.l.MarkReplicaBad(ctx, id, hdd)
	})
	eg := b.checkMovedOut(t, id, 15, errs)
	marked := false
	for _, r := range eg.Replicas {
		marked = marked || r.Device == hdd && r.Bad
	}
	if !marked {
		t.Fatalf("the bad mark on %s was lost: %+v", hdd, eg.Replicas)
	}
}

// conflictCountingKV counts failed compares and slows commits down at
// random, widening the window between a batch and its writers' commits.
type conflictCountingKV struct {
	*meta.Pebble
	conflicts atomic.Int64
	mu        sync.Mutex
	rng       *rand.Rand
}

func (k *conflictCountingKV) Commit(ctx context.Context, t *meta.Txn) (int64, error) {
	k.mu.Lock()
	d := time.Duration(k.rng.IntN(500)) * time.Microsecond
	k.mu.Unlock()
	time.Sleep(d)
	rev, err := k.Pebble.Commit(ctx, t)
	if errors.Is(err, meta.ErrConflict) {
		k.conflicts.Add(1)
	}
	return rev, err
}

// TestBatchRecordRewriteWaitsForCommits: with a record lag of a few
// extents the appender rewrites the egroup record every few batches,
// while writers of earlier batches are still committing. It waits for
// them: no writer's compare may fail because of the appender's own
// rewrite (one node, nothing else writes the records).
func TestBatchRecordRewriteWaitsForCommits(t *testing.T) {
	var ckv *conflictCountingKV
	b := newBatchEnv(t, func(p *meta.Pebble) meta.KV {
		ckv = &conflictCountingKV{Pebble: p, rng: rand.New(rand.NewPCG(1, 2))}
		return ckv
	}, Options{EgroupRecordLag: 16 << 10})
	ctx := context.Background()
	warm, _ := b.l.Locate(ctx, "bkt", "warm")
	id := warm.Extents[0].Egroup
	_, rev0 := egroupRecord(t, b.kv, id)
	const writers, each = 16, 12
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				errs <- b.put(fmt.Sprintf("w%02d/%02d", w, i), uint64(w*100+i))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if c := ckv.conflicts.Load(); c != 0 {
		t.Fatalf("%d commits failed their compare; the appender's rewrites must wait for earlier batches", c)
	}
	if _, rev := egroupRecord(t, b.kv, id); rev == rev0 {
		t.Fatal("the egroup record was never rewritten: the lag is not exercised")
	}
	checkTails(t, b.kv)
	l2 := restartLayer(t, b.env, b.l)
	for w := 0; w < writers; w++ {
		for i := 0; i < each; i++ {
			key := fmt.Sprintf("w%02d/%02d", w, i)
			if got, err := readAll(t, l2, key); err != nil || !bytes.Equal(got, payload(uint64(w*100+i), 4096)) {
				t.Fatalf("%s after restart: %v", key, err)
			}
		}
	}
	checkTails(t, b.kv)
}

// TestBatchDecidedByTheBody: a PUT whose size is unknown until the body
// ends (the S3 front end reads to EOF to verify checksums) is batched
// when the whole body fits in one small extent, and written to an egroup
// of its own when it does not.
func TestBatchDecidedByTheBody(t *testing.T) {
	b := newBatchEnv(t, nil, Options{})
	ctx := context.Background()
	batches := func() uint64 {
		var m dto.Metric
		if err := b.l.m.appendBatch.Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetHistogram().GetSampleCount()
	}
	before := batches()
	small := payload(5, 60<<10)
	if _, err := b.l.Put(ctx, "bkt", "small", bytes.NewReader(small), PutOptions{Size: -1}); err != nil {
		t.Fatal(err)
	}
	if got := batches() - before; got != 1 {
		t.Fatalf("%d batches for a 60 KiB PUT of unknown size, want 1", got)
	}
	large := payload(6, 200<<10)
	if _, err := b.l.Put(ctx, "bkt", "large", bytes.NewReader(large), PutOptions{Size: -1}); err != nil {
		t.Fatal(err)
	}
	if got := batches() - before; got != 1 {
		t.Fatalf("a 200 KiB PUT went through the appender (%d batches)", got)
	}
	for key, want := range map[string][]byte{"small": small, "large": large} {
		if got, err := readAll(t, b.l, key); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: %v", key, err)
		}
	}
}

// TestBatchQueuedWriterCancels: a writer waiting for the next batch whose
// client goes away returns at once with its context's error, leaves no
// trace, and the writers behind it are served.
func TestBatchQueuedWriterCancels(t *testing.T) {
	b := newBatchEnv(t, nil, Options{})
	cctx, cancel := context.WithCancel(context.Background())
	cancelled := make(chan error, 1)
	errs := b.putHeldBatch(t, 3, func() {
		go func() {
			data := payload(7, 4096)
			_, err := b.l.Put(cctx, "bkt", "gone", bytes.NewReader(data), PutOptions{Size: int64(len(data))})
			cancelled <- err
		}()
		for deadline := time.Now().Add(10 * time.Second); b.queued() < 4; {
			if time.Now().After(deadline) {
				t.Fatal("the writer to cancel never queued")
			}
			time.Sleep(time.Millisecond)
		}
		cancel()
		select {
		case err := <-cancelled:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled queued writer: %v, want context.Canceled", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("a cancelled writer stayed queued behind a held batch")
		}
		if q := b.queued(); q != 3 {
			t.Errorf("%d writers queued after the cancel, want 3", q)
		}
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	if _, err := b.l.Head(context.Background(), "bkt", "gone"); !errors.Is(err, ErrNoSuchKey) {
		t.Fatalf("the cancelled PUT's key: %v, want no such key", err)
	}
	b.checkAll(t, b.l, 3)
}

// TestBatchRefusesAnUnreachableExtentID: a write re-placed with an
// extent ID too far below the node's current ID block for one tail range
// is refused on its own; the batch's other writes and the egroup are
// unharmed.
func TestBatchRefusesAnUnreachableExtentID(t *testing.T) {
	b := newBatchEnv(t, func(p *meta.Pebble) meta.KV {
		// The node's IDs start past 3M, far above ID 5.
		var tx meta.Txn
		tx.Put([]byte(meta.PrefixSeq+"extent"), []byte("3000000"))
		if _, err := p.Commit(context.Background(), &tx); err != nil {
			t.Fatal(err)
		}
		return p
	}, Options{})
	ctx := context.Background()
	warm, _ := b.l.Locate(ctx, "bkt", "warm")
	id := warm.Extents[0].Egroup
	a := b.l.appenderFor(b.vec, "")
	enc := extent.Encode(nil, payload(9, 4096))
	if _, err := a.append(ctx, enc, nil, 5); !errors.Is(err, errTailRange) {
		t.Fatalf("a write with extent ID 5 when the node's IDs are past 3M: %v, want errTailRange", err)
	}
	if err := b.put("next", 10); err != nil {
		t.Fatal(err)
	}
	if loc, _ := b.l.Locate(ctx, "bkt", "next"); loc.Extents[0].Egroup != id {
		t.Fatalf("the refused write retired egroup %s: the next write went to %s", meta.FormatID(id), meta.FormatID(loc.Extents[0].Egroup))
	}
	if eg, _ := egroupRecord(t, b.kv, id); eg.State != meta.EgroupOpen {
		t.Fatalf("egroup %s is %v after a refused write, want open", meta.FormatID(id), eg.State)
	}
}

// TestRetiredEgroupSealRetried: sealing an egroup the appender retired
// fails while the metadata store is unreachable (its commits only, or its
// reads too); the next idle-seal round seals it, so it does not stay open
// (out of the Curator's reach) until the node restarts. A seal that could
// not read the record has not learnt that the record changed: it is
// retried like any other failed seal, not given up.
func TestRetiredEgroupSealRetried(t *testing.T) {
	for _, readsFail := range []bool{false, true} {
		t.Run(fmt.Sprintf("reads fail %v", readsFail), func(t *testing.T) {
			var ukv *unreachableKV
			b := newBatchEnv(t, func(p *meta.Pebble) meta.KV {
				ukv = &unreachableKV{Pebble: p, commitsOnly: !readsFail}
				return ukv
			}, Options{})
			ctx := context.Background()
			warm, _ := b.l.Locate(ctx, "bkt", "warm")
			id := warm.Extents[0].Egroup
			e := b.l.pool.take(poolKey(b.vec, ""))
			if e == nil || e.id != id {
				t.Fatalf("the pool does not hold egroup %s", meta.FormatID(id))
			}
			ukv.fail.Store(true)
			b.l.appenderFor(b.vec, "").retire(ctx, e)
			ukv.fail.Store(false)
			if eg, _ := egroupRecord(t, b.kv, id); eg.State != meta.EgroupOpen {
				t.Fatalf("egroup sealed while metadata was unreachable: %v", eg.State)
			}
			if _, err := b.l.SealIdle(ctx, time.Hour); err != nil {
				t.Fatal(err)
			}
			if eg, _ := egroupRecord(t, b.kv, id); eg.State != meta.EgroupSealed || eg.Size != extent.EncodedLen(4096) {
				t.Fatalf("after the idle-seal round: state %v size %d, want sealed at %d", eg.State, eg.Size, extent.EncodedLen(4096))
			}
			if got, err := readAll(t, b.l, "warm"); err != nil || !bytes.Equal(got, payload(0, 4096)) {
				t.Fatalf("warm: %v", err)
			}
		})
	}
}

// blockingCommitKV holds the commit of the object record of one key until
// released, as a metadata store that hangs for one writer would.
type blockingCommitKV struct {
	*meta.Pebble
	key     []byte
	held    chan struct{}
	release chan struct{}
}

func (k *blockingCommitKV) Commit(ctx context.Context, t *meta.Txn) (int64, error) {
	for _, op := range t.Ops {
		if bytes.Equal(op.Key, k.key) {
			k.held <- struct{}{}
			<-k.release
		}
	}
	return k.Pebble.Commit(ctx, t)
}

// TestBatchDrainIsBounded: a batch whose record rewrite must wait for an
// earlier writer's commit, and that commit hangs, fails after the batch's
// bound instead of holding its writers (and everyone queued behind them)
// for as long as the hang lasts. The hung writer, once its commit goes
// through, is acknowledged, and the appender works on.
func TestBatchDrainIsBounded(t *testing.T) {
	defer func(d time.Duration) { batchTimeout = d }(batchTimeout)
	batchTimeout = 300 * time.Millisecond
	var bkv *blockingCommitKV
	b := newBatchEnv(t, func(p *meta.Pebble) meta.KV {
		bkv = &blockingCommitKV{Pebble: p, key: meta.ObjectKey("bkt", "hung"), held: make(chan struct{}, 1), release: make(chan struct{})}
		return bkv
	}, Options{EgroupRecordLag: 4 << 10}) // every batch rewrites the record
	hung := make(chan error, 1)
	go func() { hung <- b.put("hung", 1) }()
	<-bkv.held // its bytes are written, its commit hangs: the egroup has a writer in it
	start := time.Now()
	err := b.put("next", 2)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a batch waiting on a hung commit: %v, want the batch's deadline", err)
	}
	if took := time.Since(start); took > 20*batchTimeout {
		t.Fatalf("the batch waited %s on a hung commit, bound %s", took, batchTimeout)
	}
	close(bkv.release)
	if err := <-hung; err != nil {
		t.Fatalf("the hung writer after its commit went through: %v", err)
	}
	if err := b.put("after", 3); err != nil {
		t.Fatal(err)
	}
	for key, seed := range map[string]uint64{"hung": 1, "after": 3} {
		if got, err := readAll(t, b.l, key); err != nil || !bytes.Equal(got, payload(seed, 4096)) {
			t.Fatalf("%s: %v", key, err)
		}
	}
	checkTails(t, b.kv)
}

// unreachableKV fails every read and commit while fail is set, as a
// metadata store does that this node cannot reach at all (commitsOnly:
// only its commits fail).
type unreachableKV struct {
	*meta.Pebble
	fail        atomic.Bool
	commitsOnly bool
}

var errUnreachable = errors.New("injected: metadata unreachable")

func (k *unreachableKV) Get(ctx context.Context, key []byte) (meta.Item, error) {
	if k.fail.Load() && !k.commitsOnly {
		return meta.Item{}, errUnreachable
	}
	return k.Pebble.Get(ctx, key)
}

func (k *unreachableKV) Scan(ctx context.Context, start, end []byte, limit int) ([]meta.Item, error) {
	if k.fail.Load() && !k.commitsOnly {
		return nil, errUnreachable
	}
	return k.Pebble.Scan(ctx, start, end, limit)
}

func (k *unreachableKV) Commit(ctx context.Context, t *meta.Txn) (int64, error) {
	if k.fail.Load() {
		return 0, errUnreachable
	}
	return k.Pebble.Commit(ctx, t)
}

// TestSealIdleKeepsWhatItCouldNotSeal: an idle-seal round that cannot
// reach the metadata store has already taken the idle egroups out of the
// pool. It keeps them for the next round instead of dropping them open,
// where nothing would seal them (no writer holds them, and the Curator
// leaves an open egroup of a live writer alone).
func TestSealIdleKeepsWhatItCouldNotSeal(t *testing.T) {
	var ukv *unreachableKV
	b := newBatchEnv(t, func(p *meta.Pebble) meta.KV {
		ukv = &unreachableKV{Pebble: p}
		return ukv
	}, Options{})
	ctx := context.Background()
	warm, _ := b.l.Locate(ctx, "bkt", "warm")
	id := warm.Extents[0].Egroup
	ukv.fail.Store(true)
	if _, err := b.l.SealIdle(ctx, 0); err == nil {
		t.Fatal("an idle-seal round with the metadata store unreachable reported no error")
	}
	ukv.fail.Store(false)
	if eg, _ := egroupRecord(t, b.kv, id); eg.State != meta.EgroupOpen {
		t.Fatalf("egroup sealed while metadata was unreachable: %v", eg.State)
	}
	if _, err := b.l.SealIdle(ctx, 0); err != nil {
		t.Fatalf("the next idle-seal round: %v", err)
	}
	if eg, _ := egroupRecord(t, b.kv, id); eg.State != meta.EgroupSealed || eg.Size != extent.EncodedLen(4096) {
		t.Fatalf("after the next round: state %v size %d, want sealed at %d", eg.State, eg.Size, extent.EncodedLen(4096))
	}
	if got, err := readAll(t, b.l, "warm"); err != nil || !bytes.Equal(got, payload(0, 4096)) {
		t.Fatalf("warm: %v", err)
	}
}

// TestSealIdleSealsAMarkedEgroup: a reader marks a replica of an egroup
// bad while it sits idle in the pool. The idle-seal round must still seal
// it (settling its tail, keeping the mark): open, it is its live writer's,
// and the Curator would never repair the bad replica.
func TestSealIdleSealsAMarkedEgroup(t *testing.T) {
	b := newBatchEnv(t, nil, Options{})
	ctx := context.Background()
	if err := b.put("k01", 101); err != nil {
		t.Fatal(err)
	}
	id, hdd := b.warmHDD(t)
	b.l.MarkReplicaBad(ctx, id, hdd)
	if _, err := b.l.SealIdle(ctx, 0); err != nil {
		t.Fatal(err)
	}
	eg, _ := egroupRecord(t, b.kv, id)
	if per := extent.EncodedLen(4096); eg.State != meta.EgroupSealed || eg.Size != 2*per {
		t.Fatalf("marked idle egroup: state %v size %d, want sealed at %d", eg.State, eg.Size, 2*per)
	}
	marked := false
	for _, r := range eg.Replicas {
		marked = marked || r.Device == hdd && r.Bad
	}
	if !marked {
		t.Fatalf("the bad mark on %s was lost: %+v", hdd, eg.Replicas)
	}
	checkTails(t, b.kv)
	for key, seed := range map[string]uint64{"warm": 0, "k01": 101} {
		if got, err := readAll(t, b.l, key); err != nil || !bytes.Equal(got, payload(seed, 4096)) {
			t.Fatalf("%s: %v", key, err)
		}
	}
}
