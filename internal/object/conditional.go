package object

import (
	"context"
	"errors"
	"fmt"

	"github.com/terrace-storage/terrace/internal/meta"
)

// Conditional changes for background actors that decide on a record they
// read earlier (S3 lifecycle rules): the change applies only if the
// object still satisfies the condition, checked on the current record and
// committed with compare-and-swap on that record's revision, so an object
// overwritten after the decision is left alone (docs/design/0000 invariant 3).

// DeleteIf deletes an object if cond holds for its current record, as
// DeleteObject does without a version: in a versioned bucket a delete
// marker becomes current (S3 lifecycle expiration of a current version),
// and the history snapshots and clones still see is kept. It reports
// whether it deleted; a missing object, a delete marker or a false
// condition is not an error.
func (l *Layer) DeleteIf(ctx context.Context, bucket, key string, cond func(ObjectInfo) bool) (bool, error) {
	if err := writable(bucket); err != nil {
		return false, err
	}
	info, rev, err := l.head(ctx, bucket, key)
	if errors.Is(err, ErrNoSuchKey) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !cond(info) {
		return false, nil
	}
	bv, err := l.cachedBucket(ctx, bucket)
	if err != nil {
		return false, err
	}
	deleted := false
	err = l.guardedCommit(ctx, bucket, bv, nil, func(bv bucketView) error {
		var t meta.Txn
		t.If(meta.BucketGuardKey(bucket), bv.guardRev)
		// The condition was decided on the record at rev (0: read
		// through a clone's parent): anything newer is left alone.
		t.If(meta.ObjectKey(bucket, key), rev)
		_, skip, err := l.deleteOps(ctx, &t, bv, bucket, key, "")
		if err != nil || skip {
			return err
		}
		_, err = l.kv.Commit(ctx, &t)
		if errors.Is(err, meta.ErrConflict) && !l.guardMoved(ctx, bucket, bv) {
			return nil // the object changed since: the caller re-decides next time
		}
		deleted = err == nil
		return err
	})
	if err != nil {
		return false, err
	}
	if deleted {
		l.m.deletes.Inc()
	}
	return deleted, nil
}

// Transition moves an object to a storage class if cond holds for its
// current record: the record's class and vector become the class's, and
// its bytes are rewritten into egroups of the new vector, as
// SetReplication does, switched with compare-and-swap on the record cond
// saw (a concurrent overwrite wins and the move is dropped). The returned
// channel yields the outcome; started is false when nothing was to be done
// (cond false, object gone, already in the class with its vector).
func (l *Layer) Transition(ctx context.Context, bucket, key, class string, cond func(ObjectInfo) bool) (done <-chan error, started bool, err error) {
	if err := writable(bucket); err != nil {
		return nil, false, err
	}
	v, ok := l.opts.Classes[class]
	if !ok {
		return nil, false, fmt.Errorf("%w: %s", ErrUnknownClass, class)
	}
	if err := l.checkVectorTiers(v); err != nil {
		return nil, false, err
	}
	info, rev, err := l.head(ctx, bucket, key)
	if errors.Is(err, ErrNoSuchKey) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if !cond(info) || (info.Class == class && info.Vector.Equal(v)) {
		return nil, false, nil
	}
	ch := make(chan error, 1)
	if info.Vector.Equal(v) {
		// Same replicas: only the class changes.
		o := info.Object
		o.Class = class
		var t meta.Txn
		if err := l.inPlaceOps(ctx, &t, bucket, key, info, rev, &o); err != nil {
			return nil, false, err
		}
		if _, err := l.kv.Commit(ctx, &t); errors.Is(err, meta.ErrConflict) {
			return nil, false, nil // changed since: the caller re-decides next time
		} else if err != nil {
			return nil, false, err
		}
		ch <- nil
		return ch, true, nil
	}
	info.Class = class // rewrite records it with the vector
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
		ch <- l.rewrite(context.WithoutCancel(ctx), info, rev, v)
	}()
	return ch, true, nil
}
