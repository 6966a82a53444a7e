package object

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

// Bucket writes and object writes meet at one key: the bucket's guard
// (meta.BucketGuard). Object commits compare the guard, never the bucket
// record, so a change of tags, ACL, policy or default vector never fails an
// upload; creating, deleting and marking a bucket for deletion rewrite the
// guard and so fail every commit that raced them. A writer whose commit
// failed on the guard re-reads it and, when the bucket is still the same
// incarnation and not being deleted, commits again with the data it
// already wrote (guardedCommit).

const (
	// deletionMarkWait bounds how long a writer waits for a DeleteBucket
	// in progress to finish or give up (it marks, checks emptiness, then
	// deletes or unmarks: a few metadata round trips).
	deletionMarkWait = 5 * time.Second
	// staleDeletionMark is the age past which a deletion mark belongs to a
	// deleter that died between marking and unmarking; writers clear it.
	staleDeletionMark = time.Minute
	// maxGuardRetries bounds re-commits after guard conflicts. Each one
	// needs a deletion to be marked and refused in between, so hitting the
	// bound means a client is issuing DeleteBucket in a tight loop.
	maxGuardRetries = 32
)

// bucketView is what a writer knows about its bucket: the record and the
// guard revision its commit compares (0: no guard record, as for buckets
// created before guards existed).
type bucketView struct {
	meta.Bucket
	rev      int64
	guardRev int64
	// deletingSince is the guard's deletion mark (unix ns), 0 if none.
	deletingSince int64
}

// CreateBucket creates a bucket; vector may be zero (cluster default).
func (l *Layer) CreateBucket(ctx context.Context, name, owner string, vector model.Vector) error {
	if err := checkBucketName(name); err != nil {
		return err
	}
	if strings.Contains(name, snapSep) {
		return fmt.Errorf("%w: %q: names containing %q are reserved for snapshots", ErrInvalidBucketName, name, snapSep)
	}
	if !vector.IsZero() {
		if err := vector.Validate(); err != nil {
			return err
		}
	}
	created := l.opts.Now().UnixNano()
	var t meta.Txn
	t.If(meta.BucketKey(name), 0)
	t.Put(meta.BucketKey(name), meta.Encode(meta.Bucket{Name: name, Owner: owner, Created: created, Vector: vector}))
	t.Put(meta.BucketGuardKey(name), meta.Encode(meta.BucketGuard{Created: created}))
	_, err := l.kv.Commit(ctx, &t)
	if errors.Is(err, meta.ErrConflict) {
		return fmt.Errorf("%w: %s", ErrBucketExists, name)
	}
	return err
}

// GetBucket returns the bucket record and its revision, from this node's
// bucket cache when it holds the bucket (invalidated by watch events, so
// another node's change shows within the watch's delay; this node's own
// changes show at once). The gateway asks for a bucket's ACL, policy and
// settings on every request; this keeps those lookups off the metadata
// store. A bucket that a DeleteBucket is examining still exists: the
// deletion's commit is the moment it stops existing, and a refused
// deletion leaves it as it was. Callers that compare-and-swap the record
// use getBucketFresh.
func (l *Layer) GetBucket(ctx context.Context, name string) (meta.Bucket, int64, error) {
	if base, snap, ok := splitSnapshotName(name); ok {
		// A snapshot is served as a read-only bucket with its source's
		// settings (owner, ACL, policy).
		b, rev, err := l.GetBucket(ctx, base)
		if err != nil {
			return meta.Bucket{}, 0, fmt.Errorf("%w: %s", ErrNoSuchBucket, name)
		}
		for _, s := range b.Snapshots {
			if s.Name == snap && s.Clone == "" && s.Rev != 0 {
				b.Name, b.Snapshots, b.Parent = name, nil, nil
				return b, rev, nil
			}
		}
		return meta.Bucket{}, 0, fmt.Errorf("%w: %s", ErrNoSuchBucket, name)
	}
	if e, ok := l.buckets.get(name, l.opts.Now()); ok {
		return e.v.Bucket, e.v.rev, nil
	}
	gen := l.buckets.generation()
	v, err := l.readBucket(ctx, name)
	if err != nil {
		return meta.Bucket{}, 0, err
	}
	l.buckets.put(name, bucketEntry{v: v, at: l.opts.Now()}, gen)
	return v.Bucket, v.rev, nil
}

// getBucketFresh reads the bucket record from the metadata store.
func (l *Layer) getBucketFresh(ctx context.Context, name string) (meta.Bucket, int64, error) {
	var b meta.Bucket
	rev, err := meta.GetRecord(ctx, l.kv, meta.BucketKey(name), &b)
	if errors.Is(err, meta.ErrNotFound) {
		return b, 0, fmt.Errorf("%w: %s", ErrNoSuchBucket, name)
	}
	return b, rev, err
}

// readBucket reads the bucket record and its guard.
func (l *Layer) readBucket(ctx context.Context, name string) (bucketView, error) {
	b, rev, err := l.getBucketFresh(ctx, name)
	if err != nil {
		return bucketView{}, err
	}
	v := bucketView{Bucket: b, rev: rev}
	var g meta.BucketGuard
	switch grev, err := meta.GetRecord(ctx, l.kv, meta.BucketGuardKey(name), &g); {
	case errors.Is(err, meta.ErrNotFound):
	case err != nil:
		return bucketView{}, err
	default:
		v.guardRev, v.deletingSince = grev, g.DeletingSince
	}
	return v, nil
}

// liveBucket reads a bucket for a writer, waiting out a deletion in
// progress: the writer must neither commit into a bucket whose emptiness
// is being checked nor fail because a deletion that will be refused is
// looking at it. A mark older than staleDeletionMark is cleared.
func (l *Layer) liveBucket(ctx context.Context, name string) (bucketView, error) {
	pause := time.Millisecond
	deadline := time.Now().Add(deletionMarkWait)
	for {
		v, err := l.readBucket(ctx, name)
		if err != nil || v.deletingSince == 0 {
			return v, err
		}
		if l.opts.Now().Sub(time.Unix(0, v.deletingSince)) > staleDeletionMark {
			l.opts.Logger.Warn("clearing a stale bucket deletion mark (its deleter died)", "bucket", name)
			var t meta.Txn
			t.If(meta.BucketGuardKey(name), v.guardRev)
			t.Put(meta.BucketGuardKey(name), meta.Encode(meta.BucketGuard{Created: v.Created}))
			if _, err := l.kv.Commit(ctx, &t); err != nil && !errors.Is(err, meta.ErrConflict) {
				return bucketView{}, err
			}
			continue
		}
		if time.Now().After(deadline) {
			return bucketView{}, fmt.Errorf("%w: %s (being deleted)", ErrNoSuchBucket, name)
		}
		select {
		case <-ctx.Done():
			return bucketView{}, ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// guardedCommit calls commit with the bucket's guard revision. When the
// commit conflicts, explain (if set) is asked first whether the conflict
// ends the write (a lost precondition, a vanished source); otherwise, if
// the guard moved while the bucket stayed the same incarnation, commit runs
// again with the fresh revision — the data is already written and stays
// valid. A bucket deleted (or deleted and re-created) in between fails the
// write with ErrNoSuchBucket.
func (l *Layer) guardedCommit(ctx context.Context, bucket string, bv bucketView, explain func() error, commit func(bv bucketView) error) error {
	for attempt := 0; ; attempt++ {
		err := commit(bv)
		if !errors.Is(err, meta.ErrConflict) {
			return err
		}
		if explain != nil {
			if eerr := explain(); eerr != nil {
				return eerr
			}
		}
		l.buckets.drop(bucket)
		fresh, ferr := l.liveBucket(ctx, bucket)
		if ferr != nil {
			return ferr
		}
		if fresh.Created != bv.Created {
			return fmt.Errorf("%w: %s (deleted and re-created during the write)", ErrNoSuchBucket, bucket)
		}
		if fresh.guardRev == bv.guardRev || attempt >= maxGuardRetries {
			return err // the conflict came from elsewhere
		}
		l.m.guardRetries.Inc()
		bv = fresh
	}
}

// guardMoved reports whether the bucket's guard changed since bv was
// read (a failed guard compare), so a retry needs a fresh view. An error
// reading the guard counts as moved: the caller's refresh reports it.
func (l *Layer) guardMoved(ctx context.Context, bucket string, bv bucketView) bool {
	it, err := l.kv.Get(ctx, meta.BucketGuardKey(bucket))
	return err != nil || it.ModRev != bv.guardRev
}

// UpdateBucket applies fn to the bucket record with compare-and-swap. It
// leaves the guard alone, so uploads in flight are not disturbed.
func (l *Layer) UpdateBucket(ctx context.Context, name string, fn func(*meta.Bucket) error) error {
	if err := writable(name); err != nil {
		return err
	}
	for attempt := 0; attempt < 16; attempt++ {
		b, rev, err := l.getBucketFresh(ctx, name)
		if err != nil {
			return err
		}
		if err := fn(&b); err != nil {
			return err
		}
		var t meta.Txn
		t.If(meta.BucketKey(name), rev)
		t.Put(meta.BucketKey(name), meta.Encode(b))
		_, err = l.kv.Commit(ctx, &t)
		l.buckets.drop(name) // this node reads its own change at once
		if errors.Is(err, meta.ErrConflict) {
			continue
		}
		return err
	}
	return fmt.Errorf("object: update bucket %s: too much contention", name)
}

// SetBucketVector sets a bucket's default replication vector.
func (l *Layer) SetBucketVector(ctx context.Context, name string, v model.Vector) error {
	if !v.IsZero() {
		if err := l.checkVectorTiers(v); err != nil {
			return err
		}
	}
	return l.UpdateBucket(ctx, name, func(b *meta.Bucket) error { b.Vector = v; return nil })
}

// ListBuckets returns every bucket in name order.
func (l *Layer) ListBuckets(ctx context.Context) ([]meta.Bucket, error) {
	items, err := l.kv.Scan(ctx, []byte(meta.PrefixBucket), meta.PrefixEnd([]byte(meta.PrefixBucket)), 0)
	if err != nil {
		return nil, err
	}
	out := make([]meta.Bucket, 0, len(items))
	for _, it := range items {
		var b meta.Bucket
		if err := meta.Decode(it.Value, &b); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// DeleteBucket deletes an empty bucket. It marks the bucket's guard as
// deleting (so every object commit that raced it fails its compare and
// every new writer waits), checks emptiness, then deletes the record and
// the guard — or, if the bucket is not empty, clears the mark, and the
// waiting writers carry on as if nothing happened.
func (l *Layer) DeleteBucket(ctx context.Context, name string) error {
	bv, err := l.liveBucket(ctx, name) // waits out another deletion in progress
	if err != nil {
		return err
	}
	var mark meta.Txn
	mark.If(meta.BucketGuardKey(name), bv.guardRev)
	mark.Put(meta.BucketGuardKey(name), meta.Encode(meta.BucketGuard{Created: bv.Created, DeletingSince: l.opts.Now().UnixNano()}))
	markRev, err := l.kv.Commit(ctx, &mark)
	l.buckets.drop(name)
	if err != nil {
		if errors.Is(err, meta.ErrConflict) {
			return fmt.Errorf("%w: delete bucket %s", ErrBucketBusy, name)
		}
		return err
	}
	unmark := func() {
		var t meta.Txn
		t.If(meta.BucketGuardKey(name), markRev)
		t.Put(meta.BucketGuardKey(name), meta.Encode(meta.BucketGuard{Created: bv.Created}))
		_, err := l.kv.Commit(context.WithoutCancel(ctx), &t)
		l.buckets.drop(name)
		if err != nil {
			// Writers clear the mark themselves once it is stale.
			l.opts.Logger.Error("un-mark bucket deletion failed", "bucket", name, "err", err)
		}
	}
	if len(bv.Snapshots) > 0 {
		unmark()
		var names []string
		for _, s := range bv.Snapshots {
			if s.Clone != "" {
				names = append(names, "clone "+s.Clone)
			} else {
				names = append(names, "snapshot "+s.Name)
			}
		}
		return fmt.Errorf("%w: %s has %s: delete them first", ErrBucketNotEmpty, name, strings.Join(names, ", "))
	}
	empty, err := l.empty(ctx, name)
	if err != nil {
		unmark()
		return err
	}
	if !empty {
		unmark()
		return fmt.Errorf("%w: %s", ErrBucketNotEmpty, name)
	}
	// What is left is history nobody can see any more (tombstones, hidden
	// versions): it goes with the bucket.
	for _, p := range [][]byte{meta.ObjectPrefix(name, ""), meta.VersionPrefix(name, "")} {
		if err := l.deleteRange(ctx, p); err != nil {
			unmark()
			return err
		}
	}
	// Abandoned multipart uploads do not keep a bucket alive (S3 semantics);
	// their part records are removed with it and their data becomes garbage.
	// All of them must go before the bucket does: left behind, they would
	// show in a bucket re-created under the name, and could be completed
	// into it.
	if err := l.deleteRange(ctx, []byte(meta.PrefixUpload+name+"\x00")); err != nil {
		unmark()
		return err
	}
	var del meta.Txn
	del.If(meta.BucketGuardKey(name), markRev)
	del.Del(meta.BucketKey(name))
	del.Del(meta.BucketGuardKey(name))
	_, err = l.kv.Commit(ctx, &del)
	l.buckets.drop(name)
	if err == nil && bv.Parent != nil {
		// A clone releases the pin it held on its source.
		if perr := l.removePin(context.WithoutCancel(ctx), bv.Parent.Bucket, bv.Parent.Snapshot, true); perr != nil && !errors.Is(perr, ErrNoSuchSnapshot) && !errors.Is(perr, ErrNoSuchBucket) {
			l.opts.Logger.Warn("releasing a deleted clone's pin", "clone", name, "source", bv.Parent.Bucket, "err", perr)
		}
	}
	if errors.Is(err, meta.ErrConflict) {
		// A writer found our mark stale and cleared it: it may have
		// written into the bucket, so it is not ours to delete any more.
		return fmt.Errorf("%w: delete bucket %s", ErrBucketBusy, name)
	}
	return err
}

// empty reports whether a bucket holds no object a listing shows (its
// own or, for a clone, its parent's) and no S3 version.
func (l *Layer) empty(ctx context.Context, name string) (bool, error) {
	res, err := l.List(ctx, name, ListOptions{MaxKeys: 1})
	if err != nil || len(res.Objects)+len(res.CommonPrefixes) > 0 {
		return false, err
	}
	p := meta.VersionPrefix(name, "")
	start := p
	for {
		items, err := l.kv.Scan(ctx, start, meta.PrefixEnd(p), 256)
		if err != nil {
			return false, err
		}
		for _, it := range items {
			var v meta.Version
			if err := meta.Decode(it.Value, &v); err != nil {
				return false, err
			}
			if v.S3 {
				return false, nil
			}
		}
		if len(items) < 256 {
			return true, nil
		}
		start = append(append([]byte(nil), items[len(items)-1].Key...), 0)
	}
}

// deleteRange deletes every key under a prefix, in batches.
func (l *Layer) deleteRange(ctx context.Context, p []byte) error {
	for {
		items, err := l.kv.Scan(ctx, p, meta.PrefixEnd(p), meta.MaxTxnOps-1)
		if err != nil || len(items) == 0 {
			return err
		}
		var t meta.Txn
		for _, it := range items {
			t.Del(it.Key)
		}
		if _, err := l.kv.Commit(ctx, &t); err != nil {
			return err
		}
	}
}
