package object

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

// gcNow is the Curator's data removal (invariant 7) with a zero grace, run
// at this instant: every extent no o/, r/ or u/ record references goes.
func gcNow(t *testing.T, kv meta.KV, l *Layer) int {
	t.Helper()
	ctx := context.Background()
	ref := map[uint64]bool{}
	for _, p := range []string{meta.PrefixObject, meta.PrefixVersion, meta.PrefixUpload} {
		items, err := kv.Scan(ctx, []byte(p), meta.PrefixEnd([]byte(p)), 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			var refs []meta.ExtentRef
			switch p {
			case meta.PrefixUpload:
				var pt meta.Part
				if meta.Decode(it.Value, &pt) == nil {
					refs = pt.Extents
				}
			default:
				var o meta.Object
				if err := meta.Decode(it.Value, &o); err != nil {
					t.Fatal(err)
				}
				refs = o.Extents
			}
			for _, r := range refs {
				ref[r.ID] = true
			}
		}
	}
	items, err := kv.Scan(ctx, []byte(meta.PrefixExtent), meta.PrefixEnd([]byte(meta.PrefixExtent)), 0)
	if err != nil {
		t.Fatal(err)
	}
	var dead []ExtentRev
	for _, it := range items {
		id, err := meta.ParseID(it.Key)
		if err != nil {
			t.Fatal(err)
		}
		if !ref[id] {
			dead = append(dead, ExtentRev{ID: id, ModRev: it.ModRev})
		}
	}
	n, _, err := l.RemoveExtents(ctx, dead)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func readKey(l *Layer, bucket, key string) (string, error) {
	_, rc, err := l.Get(context.Background(), bucket, key, 0, -1)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return string(b), err
}

// twoVersions is a versioned bucket bkt with two versions of k (the
// first returned), over a store whose hook runs at the first scan of k's
// versions.
func twoVersions(t *testing.T) (*env, *scanHookKV, *Layer, ObjectInfo) {
	e := newEnv(t)
	hkv := &scanHookKV{Pebble: e.kv, prefix: meta.VersionPrefix("bkt", "k")}
	l := e.reopenOver(hkv)
	ctx := context.Background()
	if err := l.CreateBucket(ctx, "bkt", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	if err := l.SetVersioning(ctx, "bkt", VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	v1 := e.putS("bkt", "k", "version-one")
	e.putS("bkt", "k", "version-two")
	return e, hkv, l, v1
}

// Copy of an old version onto its own key (S3's "restore a version")
// takes the sameKey branch, which compares nothing on the source. A
// delete of that version by ID between the lookup and the commit leaves
// the new current version pointing at extents nothing referenced.
func TestCopyOntoItselfRacesVersionDelete(t *testing.T) {
	e, hkv, l, v1 := twoVersions(t)
	ctx := context.Background()
	removed := 0
	hkv.hook = func() {
		if _, err := l.DeleteObject(ctx, "bkt", "k", v1.VersionID); err != nil {
			t.Errorf("delete v1: %v", err)
		}
		removed = gcNow(t, e.kv, l)
	}
	_, err := l.Copy(ctx, "bkt", "k", "bkt", "k", CopyOptions{SrcVersion: v1.VersionID, ReplaceMeta: true})
	if hkv.hook != nil {
		t.Fatal("hook did not run")
	}
	t.Logf("copy: err=%v; extents removed at the race: %d", err, removed)
	if err == nil {
		if got, rerr := readKey(l, "bkt", "k"); rerr != nil || got != "version-one" {
			t.Fatalf("copy committed over a deleted source: read %q, %v", got, rerr)
		}
	}
}

// Same, current version, unversioned bucket (non-special: no compare at
// all): CopyObject onto itself with REPLACE metadata racing an overwrite.
func TestCopyOntoItselfRacesOverwrite(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	hkv := &commitHookKV{Pebble: e.kv}
	l := e.reopenOver(hkv)
	if err := l.CreateBucket(ctx, "bkt", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	e.putS("bkt", "k", "old-bytes")
	// The hook runs before Copy's commit (the first commit while armed).
	hkv.before = func() {
		if _, err := l.Put(ctx, "bkt", "k", strings.NewReader("new"), PutOptions{Size: 3}); err != nil {
			t.Errorf("overwrite: %v", err)
		}
		gcNow(t, e.kv, l)
	}
	hkv.armed.Store(true)
	_, err := l.Copy(ctx, "bkt", "k", "bkt", "k", CopyOptions{ReplaceMeta: true, Headers: map[string]string{"content-type": "x/y"}})
	t.Logf("copy: %v", err)
	if err == nil {
		if got, rerr := readKey(l, "bkt", "k"); rerr != nil {
			t.Fatalf("copy onto itself resurrected collected extents: read %q, %v", got, rerr)
		}
	}
}

// TestCompleteFencesParts: CompleteUpload reads the part records, then
// commits. A part uploaded again in between left the object pointing at
// the replaced part's extents, which the Curator may remove. A complete
// now fences the upload first: a part upload begun before fails its
// commit, one begun after is refused, and the object reads back; a
// complete that fails takes parts again.
func TestCompleteFencesParts(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.l.CreateBucket(ctx, "bkt", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	id, err := e.l.CreateUpload(ctx, "bkt", "k", PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hkv := &scanHookKV{Pebble: e.kv, prefix: append(meta.UploadKey("bkt", id), 0)}
	l := e.reopenOver(hkv)
	p1, err := l.UploadPart(ctx, "bkt", id, 1, strings.NewReader("part-one"), 8, "")
	if err != nil {
		t.Fatal(err)
	}
	// A complete naming a part never uploaded fails, and parts are
	// taken again afterwards.
	if _, err := l.CompleteUpload(ctx, "bkt", id, []CompletePart{{1, p1.ETag}, {2, "nope"}}, nil); !errors.Is(err, ErrInvalidPart) {
		t.Fatalf("complete with a missing part: %v", err)
	}
	if _, err := l.UploadPart(ctx, "bkt", id, 2, strings.NewReader("two"), 3, ""); err != nil {
		t.Fatalf("part after a failed complete: %v", err)
	}
	var reupload error
	hkv.hook = func() {
		// The same bytes again (an SDK retry landing late), then data
		// removal right away.
		_, reupload = l.UploadPart(ctx, "bkt", id, 1, strings.NewReader("part-one"), 8, "")
		gcNow(t, e.kv, l)
	}
	if _, err := l.CompleteUpload(ctx, "bkt", id, []CompletePart{{1, p1.ETag}}, nil); err != nil {
		t.Fatal(err)
	}
	if hkv.hook != nil {
		t.Fatal("hook did not run")
	}
	if !errors.Is(reupload, ErrNoSuchUpload) {
		t.Fatalf("part uploaded while the upload was being completed: %v", reupload)
	}
	if got, err := readKey(l, "bkt", "k"); err != nil || got != "part-one" {
		t.Fatalf("completed object: read %q, %v", got, err)
	}
}

// commitHookKV runs before (once, while armed) ahead of the next commit,
// or after once a commit wrote key.
type commitHookKV struct {
	*meta.Pebble
	armed  atomic.Bool
	before func()
	after  func()
	key    []byte
}

func (k *commitHookKV) Commit(ctx context.Context, t *meta.Txn) (int64, error) {
	if k.before != nil && k.armed.Swap(false) {
		k.before()
	}
	rev, err := k.Pebble.Commit(ctx, t)
	if err == nil && k.after != nil && k.key != nil {
		for _, op := range t.Ops {
			if bytes.Equal(op.Key, k.key) && k.armed.Swap(false) {
				k.after()
				break
			}
		}
	}
	return rev, err
}

// Copy under a new vector Puts, then stamps the source's multipart ETag
// and part sizes with a separate, unconditional UpdateObject: an object
// written to the destination in between gets them.
func TestCopyNewVectorStampsOnlyItsOwnObject(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	hkv := &commitHookKV{Pebble: e.kv, key: meta.ObjectKey("bkt", "dst")}
	l := e.reopenOver(hkv)
	if err := l.CreateBucket(ctx, "bkt", "", model.MustParseVector("hdd=2")); err != nil {
		t.Fatal(err)
	}
	if err := e.multipart("bkt", "src", []byte("multipart-source")); err != nil {
		t.Fatal(err)
	}
	src, _ := l.Head(ctx, "bkt", "src")
	hkv.after = func() {
		if _, err := l.Put(ctx, "bkt", "dst", strings.NewReader("someone else"), PutOptions{Size: 12}); err != nil {
			t.Errorf("racing put: %v", err)
		}
	}
	hkv.armed.Store(true)
	if _, err := l.Copy(ctx, "bkt", "src", "bkt", "dst", CopyOptions{Vector: model.MustParseVector("ssd=1")}); err != nil {
		t.Fatal(err)
	}
	got, _ := l.Head(ctx, "bkt", "dst")
	body, _ := readKey(l, "bkt", "dst")
	t.Logf("dst: body=%q etag=%s parts=%v (src etag %s)", body, got.ETag, got.Parts, src.ETag)
	if body == "someone else" && (got.ETag == src.ETag || len(got.Parts) > 0) {
		t.Fatalf("the racing PUT's object got the copy source's ETag %s and parts %v", got.ETag, got.Parts)
	}
}

// Control: the cross-key copy compares its source and refuses.
func TestCopyToAnotherKeyRacesOverwrite(t *testing.T) {
	e, hkv, l, v1 := twoVersions(t)
	ctx := context.Background()
	hkv.hook = func() {
		if _, err := l.DeleteObject(ctx, "bkt", "k", v1.VersionID); err != nil {
			t.Errorf("delete v1: %v", err)
		}
		gcNow(t, e.kv, l)
	}
	_, err := l.Copy(ctx, "bkt", "k", "bkt", "k2", CopyOptions{SrcVersion: v1.VersionID})
	if err == nil {
		t.Fatal("cross-key copy committed over a deleted source")
	}
	t.Logf("control copy: %v", err)
}

// failUploadDeleteKV fails (without applying) the first commit that
// deletes an upload-map key while armed.
type failUploadDeleteKV struct {
	*meta.Pebble
	armed atomic.Bool
}

func (k *failUploadDeleteKV) Commit(ctx context.Context, t *meta.Txn) (int64, error) {
	for _, op := range t.Ops {
		if bytes.HasPrefix(op.Key, []byte(meta.PrefixUpload)) && k.armed.Swap(false) {
			return 0, io.ErrUnexpectedEOF
		}
	}
	return k.Pebble.Commit(ctx, t)
}

// DeleteBucket ignores a failure deleting upload records and deletes the
// bucket anyway: the upload survives into a bucket re-created under the
// same name and can be completed there.
func TestDeleteBucketRemovesEveryUpload(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	fkv := &failUploadDeleteKV{Pebble: e.kv}
	l := e.reopenOver(fkv)
	if err := l.CreateBucket(ctx, "bkt", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	id, err := l.CreateUpload(ctx, "bkt", "k", PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := l.UploadPart(ctx, "bkt", id, 1, strings.NewReader("old-bucket"), 10, "")
	if err != nil {
		t.Fatal(err)
	}
	fkv.armed.Store(true)
	derr := l.DeleteBucket(ctx, "bkt")
	t.Logf("delete bucket: %v", derr)
	if derr != nil {
		return
	}
	if err := l.CreateBucket(ctx, "bkt", "someone-else", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.CompleteUpload(ctx, "bkt", id, []CompletePart{{1, p.ETag}}, nil); err == nil {
		got, _ := readKey(l, "bkt", "k")
		t.Fatalf("an upload of the deleted bucket completed into its successor: k=%q", got)
	}
}

// firstRevKV remembers the revision at which each egroup record was first
// written: what a scan that read it then would compare.
type firstRevKV struct {
	*meta.Pebble
	mu    sync.Mutex
	first map[uint64]int64
}

func (k *firstRevKV) Commit(ctx context.Context, t *meta.Txn) (int64, error) {
	rev, err := k.Pebble.Commit(ctx, t)
	if err == nil {
		k.mu.Lock()
		for _, op := range t.Ops {
			if bytes.HasPrefix(op.Key, []byte(meta.PrefixEgroup)) && !op.Delete {
				if id, perr := meta.ParseID(op.Key); perr == nil {
					if _, seen := k.first[id]; !seen {
						k.first[id] = rev
					}
				}
			}
		}
		k.mu.Unlock()
	}
	return rev, err
}

// TestRewriteOutlivesAStaleRemoval: a transform writes its new egroups,
// verifies them, then switches extents to them. Until the first switch
// nothing references them; a scan in that window that finds them older
// than the grace (a slow verification) plans their removal, comparing
// the record it read. The rewrite refreshes each new egroup's record
// before switching, so that removal is stale and the data stays.
func TestRewriteOutlivesAStaleRemoval(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	fkv := &firstRevKV{Pebble: e.kv, first: map[uint64]int64{}}
	l := e.reopenOver(fkv)
	l.CreateBucket(ctx, "logs", "", model.Vector{})
	want := logText(1, 300_000)
	e.put("logs", "a", want, "ssd=1,hdd=1")
	if _, err := l.SealIdle(ctx, 0); err != nil {
		t.Fatal(err)
	}
	src := e.egroupOf("logs", "a")
	res, err := l.Rewrite(ctx, RewriteRequest{Vector: model.MustParseVector("ssd=1,hdd=1"), Codec: "zstd", Sources: []RewriteSource{e.source(src)}})
	if err != nil || res.Moved == 0 {
		t.Fatalf("rewrite: %+v %v", res, err)
	}
	dst := e.egroupOf("logs", "a")
	if dst == src {
		t.Fatal("the rewrite did not move the object")
	}
	if _, err := l.RemoveEgroup(ctx, dst, fkv.first[dst]); !errors.Is(err, ErrStale) {
		t.Fatalf("removal planned before the switch: %v, want stale", err)
	}
	got, err := readKey(l, "logs", "a")
	if err != nil || got != string(want) {
		t.Fatalf("object after the rewrite: %v", err)
	}
}

// TestCopySourceRev pins that a copy asked of the source record the
// caller read (SourceRev, from HeadVersion) copies that record or fails
// with ErrSourceChanged: a caller that judged the record (preconditions,
// its encryption record) never gets the bytes of one that replaced it.
// Both Copy (shared extents and rewrite) and UploadPartCopyWith.
func TestCopySourceRev(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.l.CreateBucket(ctx, "bkt", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	e.putS("bkt", "src", "first")
	head, err := e.l.HeadVersion(ctx, "bkt", "src", "")
	if err != nil {
		t.Fatal(err)
	}
	if head.Rev == 0 {
		t.Fatal("HeadVersion returned no Rev")
	}
	// Unchanged: the copy goes through.
	if _, err := e.l.Copy(ctx, "bkt", "src", "bkt", "ok", CopyOptions{SourceRev: head.Rev}); err != nil {
		t.Fatal(err)
	}
	if got, err := readKey(e.l, "bkt", "ok"); err != nil || got != "first" {
		t.Fatalf("copy of the unchanged source: %q, %v", got, err)
	}
	e.putS("bkt", "src", "second")
	for name, opts := range map[string]CopyOptions{
		"shared":  {SourceRev: head.Rev},
		"rewrite": {SourceRev: head.Rev, Vector: model.MustParseVector("hdd=2")},
	} {
		if _, err := e.l.Copy(ctx, "bkt", "src", "bkt", name, opts); !errors.Is(err, ErrSourceChanged) {
			t.Errorf("%s copy of an overwritten source: %v, want ErrSourceChanged", name, err)
		}
		if _, err := e.l.Head(ctx, "bkt", name); err == nil {
			got, _ := readKey(e.l, "bkt", name)
			t.Errorf("%s copy of an overwritten source stored %q", name, got)
		}
	}
	up, err := e.l.CreateUpload(ctx, "bkt", "mp", PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.l.UploadPartCopyWith(ctx, "bkt", up, 1, "bkt", "src", 0, -1, PartCopyOptions{SourceRev: head.Rev}); !errors.Is(err, ErrSourceChanged) {
		t.Errorf("part copy of an overwritten source: %v, want ErrSourceChanged", err)
	}
	now, err := e.l.HeadVersion(ctx, "bkt", "src", "")
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.l.UploadPartCopyWith(ctx, "bkt", up, 1, "bkt", "src", 0, -1, PartCopyOptions{SourceRev: now.Rev})
	if err != nil || p.Size != int64(len("second")) {
		t.Fatalf("part copy of the current source: %+v, %v", p, err)
	}
}
