package object

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

// TestBucketChangesDoNotFailWrites: 16 writers and multipart uploads run
// while one goroutine rewrites the bucket's attributes and default vector
// in a loop and another attempts (refused) deletions of the non-empty
// bucket. Not one write may fail, and every written object reads back.
func TestBucketChangesDoNotFailWrites(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.l.CreateBucket(ctx, "bkt", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	e.put("bkt", "keeps-it-non-empty", []byte("x"), "hdd=1")

	stop := make(chan struct{})
	var changes, refused atomic.Int64
	var bg sync.WaitGroup
	bg.Add(2)
	go func() { // PutBucketTagging / PutBucketAcl / set-vector, as fast as it goes
		defer bg.Done()
		vectors := []model.Vector{{}, model.MustParseVector("hdd=1"), model.MustParseVector("any=2")}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			err := e.l.UpdateBucket(ctx, "bkt", func(b *meta.Bucket) error {
				if b.Attrs == nil {
					b.Attrs = map[string][]byte{}
				}
				b.Attrs["tags"] = fmt.Appendf(nil, "round=%d", i)
				b.Vector = vectors[i%len(vectors)]
				return nil
			})
			if err != nil {
				t.Errorf("update bucket: %v", err)
				return
			}
			changes.Add(1)
		}
	}()
	go func() { // DeleteBucket on a bucket that is never empty
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			err := e.l.DeleteBucket(ctx, "bkt")
			if !errors.Is(err, ErrBucketNotEmpty) && !errors.Is(err, ErrBucketBusy) {
				t.Errorf("delete of a non-empty bucket: %v", err)
				return
			}
			refused.Add(1)
		}
	}()

	const writers, perWriter = 16, 25
	var wg sync.WaitGroup
	var failed atomic.Int64
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				key := fmt.Sprintf("w%02d/%03d", w, i)
				data := payload(uint64(w*1000+i), 4096)
				var err error
				if i%5 == 4 { // every fifth object is a one-part multipart upload
					err = e.multipart("bkt", key, data)
				} else {
					_, err = e.l.Put(ctx, "bkt", key, bytes.NewReader(data), PutOptions{Size: int64(len(data))})
				}
				if err != nil {
					failed.Add(1)
					t.Errorf("write %s: %v", key, err)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	bg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d of %d writes failed", failed.Load(), writers*perWriter)
	}
	if changes.Load() == 0 || refused.Load() == 0 {
		t.Fatalf("the bucket was not disturbed (%d changes, %d refused deletions): the test proves nothing", changes.Load(), refused.Load())
	}
	for w := range writers {
		for i := range perWriter {
			key := fmt.Sprintf("w%02d/%03d", w, i)
			got, err := e.get("bkt", key, 0, -1)
			if err != nil || !bytes.Equal(got, payload(uint64(w*1000+i), 4096)) {
				t.Fatalf("%s: read back %d bytes, %v", key, len(got), err)
			}
		}
	}
	t.Logf("%d bucket changes and %d refused deletions during %d writes", changes.Load(), refused.Load(), writers*perWriter)
}

// multipart writes data as a one-part multipart upload.
func (e *env) multipart(bucket, key string, data []byte) error {
	ctx := context.Background()
	id, err := e.l.CreateUpload(ctx, bucket, key, PutOptions{})
	if err != nil {
		return fmt.Errorf("create upload: %w", err)
	}
	p, err := e.l.UploadPart(ctx, bucket, id, 1, bytes.NewReader(data), int64(len(data)), "")
	if err != nil {
		return fmt.Errorf("upload part: %w", err)
	}
	_, err = e.l.CompleteUpload(ctx, bucket, id, []CompletePart{{1, p.ETag}}, nil)
	return err
}

// gatedBody yields its bytes only after the gate opens, so a test can act
// while the write is in flight.
type gatedBody struct {
	gate    chan struct{}
	started chan struct{}
	once    sync.Once
	r       *bytes.Reader
}

func (g *gatedBody) Read(p []byte) (int, error) {
	g.once.Do(func() { close(g.started) })
	<-g.gate
	return g.r.Read(p)
}

// TestBucketDeletedMidUpload: a bucket deleted while a PUT streams its
// body fails the PUT with NoSuchBucket, and no object appears — not in the
// deleted bucket, and not in a bucket of the same name created afterwards.
func TestBucketDeletedMidUpload(t *testing.T) {
	for _, recreate := range []bool{false, true} {
		t.Run(fmt.Sprintf("recreate=%v", recreate), func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			if err := e.l.CreateBucket(ctx, "bkt", "", model.Vector{}); err != nil {
				t.Fatal(err)
			}
			data := payload(9, 64<<10)
			body := &gatedBody{gate: make(chan struct{}), started: make(chan struct{}), r: bytes.NewReader(data)}
			errc := make(chan error, 1)
			go func() {
				_, err := e.l.Put(ctx, "bkt", "k", body, PutOptions{Size: int64(len(data))})
				errc <- err
			}()
			<-body.started // the writer has read its bucket and is streaming
			if err := e.l.DeleteBucket(ctx, "bkt"); err != nil {
				t.Fatalf("delete the (still empty) bucket: %v", err)
			}
			if recreate {
				if err := e.l.CreateBucket(ctx, "bkt", "", model.Vector{}); err != nil {
					t.Fatal(err)
				}
			}
			close(body.gate)
			if err := <-errc; !errors.Is(err, ErrNoSuchBucket) {
				t.Fatalf("PUT into a deleted bucket: %v, want NoSuchBucket", err)
			}
			if _, err := e.l.Head(ctx, "bkt", "k"); err == nil {
				t.Fatal("the failed PUT left a visible object")
			}
		})
	}
}

// TestStaleDeletionMarkIsCleared: a deleter killed between marking and
// deciding leaves a mark behind; writers wait for a fresh one and clear a
// stale one instead of failing forever.
func TestStaleDeletionMarkIsCleared(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.l.CreateBucket(ctx, "bkt", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	bv, err := e.l.readBucket(ctx, "bkt")
	if err != nil {
		t.Fatal(err)
	}
	// What a DeleteBucket that died after its mark leaves behind.
	var t1 meta.Txn
	t1.Put(meta.BucketGuardKey("bkt"), meta.Encode(meta.BucketGuard{
		Created: bv.Created, DeletingSince: time.Now().Add(-2 * staleDeletionMark).UnixNano()}))
	if _, err := e.kv.Commit(ctx, &t1); err != nil {
		t.Fatal(err)
	}
	e.l.buckets.drop("bkt")
	e.put("bkt", "after-crash", []byte("data"), "hdd=1")
	after, err := e.l.readBucket(ctx, "bkt")
	if err != nil || after.deletingSince != 0 {
		t.Fatalf("mark not cleared: %+v, %v", after, err)
	}
	if err := e.l.DeleteBucket(ctx, "bkt"); !errors.Is(err, ErrBucketNotEmpty) {
		t.Fatalf("delete after clearing: %v", err)
	}
}

// TestLegacyBucketWithoutGuard: a bucket written before guards existed
// (no guard record) takes writes and deletes like any other.
func TestLegacyBucketWithoutGuard(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var t1 meta.Txn
	t1.Put(meta.BucketKey("old"), meta.Encode(meta.Bucket{Name: "old", Created: 1}))
	if _, err := e.kv.Commit(ctx, &t1); err != nil {
		t.Fatal(err)
	}
	e.put("old", "k", []byte("v"), "hdd=1")
	if err := e.l.DeleteBucket(ctx, "old"); !errors.Is(err, ErrBucketNotEmpty) {
		t.Fatalf("non-empty: %v", err)
	}
	e.put("old", "k2", []byte("v"), "hdd=1")
	for _, k := range []string{"k", "k2"} {
		if err := e.l.Delete(ctx, "old", k); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.l.DeleteBucket(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kv.Get(ctx, meta.BucketGuardKey("old")); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("guard left behind: %v", err)
	}
}

// TestBucketCache: gateway lookups are served from the cache; this node's
// own changes show at once, another node's (a write straight to the
// metadata store) as soon as the watch delivers it, and a deleted bucket
// is gone for readers and writers alike.
func TestBucketCache(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.l.CreateBucket(ctx, "bkt", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	attr := func() string {
		b, _, err := e.l.GetBucket(ctx, "bkt")
		if err != nil {
			t.Fatal(err)
		}
		return string(b.Attrs["x"])
	}
	attr() // fill
	if err := e.l.UpdateBucket(ctx, "bkt", func(b *meta.Bucket) error {
		b.Attrs = map[string][]byte{"x": []byte("local")}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := attr(); got != "local" {
		t.Fatalf("own change not visible at once: %q", got)
	}
	// Another node's change: written to the store behind the layer's back.
	b, rev, err := e.l.getBucketFresh(ctx, "bkt")
	if err != nil {
		t.Fatal(err)
	}
	b.Attrs["x"] = []byte("remote")
	var tx meta.Txn
	tx.If(meta.BucketKey("bkt"), rev)
	tx.Put(meta.BucketKey("bkt"), meta.Encode(b))
	if _, err := e.kv.Commit(ctx, &tx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(bucketCacheTTL)
	for attr() != "remote" {
		if time.Now().After(deadline) {
			t.Fatal("another node's change not visible within the cache TTL")
		}
		time.Sleep(time.Millisecond)
	}
	if err := e.l.DeleteBucket(ctx, "bkt"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.l.GetBucket(ctx, "bkt"); !errors.Is(err, ErrNoSuchBucket) {
		t.Fatalf("deleted bucket still cached: %v", err)
	}
}

// TestBucketCacheFillRacingDrop: a fill whose read started before an
// invalidation is not stored.
func TestBucketCacheFillRacingDrop(t *testing.T) {
	c := newBucketCache()
	gen := c.generation()
	c.drop("b") // a watch event arrives while the fill is reading
	c.put("b", bucketEntry{at: time.Now()}, gen)
	if _, ok := c.get("b", time.Now()); ok {
		t.Fatal("a fill that raced a drop was cached")
	}
	c.put("b", bucketEntry{at: time.Now()}, c.generation())
	if _, ok := c.get("b", time.Now()); !ok {
		t.Fatal("a clean fill was not cached")
	}
}

// TestBucketNamesFromReusedBuffers: the S3 gateway hands the layer names
// that alias its HTTP server's request buffers, which are overwritten by
// the next request. Writes to "bkt000", "bkt001", ..., each named from the
// same buffer, must land in their own bucket: a cached bucket view stored
// under the aliased name would later be found under another bucket's name,
// and that bucket's writes would fail as "deleted and re-created".
func TestBucketNamesFromReusedBuffers(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const n = 300 // enough entries that stale keys share hash slots with live ones
	buf := []byte("bkt000")
	name := unsafe.String(&buf[0], len(buf)) // what fasthttp's unsafe strings are
	for i := range n {
		copy(buf[3:], fmt.Sprintf("%03d", i))
		if err := e.l.CreateBucket(ctx, string(buf), "", model.Vector{}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.l.Put(ctx, name, "k", bytes.NewReader([]byte("x")), PutOptions{Size: 1, Vector: model.MustParseVector("hdd=1")}); err != nil {
			t.Fatalf("put into %s: %v", buf, err)
		}
		if b, _, err := e.l.GetBucket(ctx, name); err != nil || b.Name != string(buf) {
			t.Fatalf("bucket %s reads as %q, %v", buf, b.Name, err)
		}
	}
}
