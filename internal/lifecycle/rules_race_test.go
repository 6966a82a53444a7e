package lifecycle

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
)

// removeRuleKV removes bucket "b"'s lifecycle configuration (as
// DeleteBucketLifecycle does: a bucket-record rewrite) right after the
// runner's first expiration in bucket "a" commits — i.e. while the pass
// is still working on "a".
type removeRuleKV struct {
	*meta.Pebble
	done atomic.Bool
}

func (k *removeRuleKV) Commit(ctx context.Context, t *meta.Txn) (int64, error) {
	rev, err := k.Pebble.Commit(ctx, t)
	if err != nil || k.done.Load() {
		return rev, err
	}
	for _, op := range t.Ops {
		if op.Delete && bytes.HasPrefix(op.Key, meta.ObjectKey("aaa", "")) && k.done.CompareAndSwap(false, true) {
			var b meta.Bucket
			brev, gerr := meta.GetRecord(ctx, k.Pebble, meta.BucketKey("bbb"), &b)
			if gerr != nil {
				panic(gerr)
			}
			delete(b.Attrs, BucketAttr)
			var u meta.Txn
			u.If(meta.BucketKey("bbb"), brev)
			u.Put(meta.BucketKey("bbb"), meta.Encode(b))
			if _, cerr := k.Pebble.Commit(ctx, &u); cerr != nil {
				panic(cerr)
			}
		}
	}
	return rev, err
}

// TestRuleRemovedDuringAPassIsNotApplied: a pass reads the buckets when it
// begins and can take hours. A rule removed from a bucket the pass has not
// reached yet must not expire that bucket's objects (in an unversioned
// bucket that is permanent).
func TestRuleRemovedDuringAPassIsNotApplied(t *testing.T) {
	clock := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	now := func() time.Time { return clock }
	var rk *removeRuleKV
	l := newLayerOver(t, now, func(p *meta.Pebble) meta.KV { rk = &removeRuleKV{Pebble: p}; return rk })
	ctx := context.Background()
	cfg, _ := json.Marshal(Config{Rules: []Rule{{ID: "exp", Enabled: true, Expiration: &Expiration{Days: 1}}}})
	for _, name := range []string{"aaa", "bbb"} {
		if err := l.CreateBucket(ctx, name, "", model.Vector{}); err != nil {
			t.Fatal(err)
		}
		if err := l.UpdateBucket(ctx, name, func(b *meta.Bucket) error { b.Attrs = map[string][]byte{BucketAttr: cfg}; return nil }); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"k1", "k2"} {
			if _, err := l.Put(ctx, name, k, strings.NewReader("data"), object.PutOptions{Size: 4}); err != nil {
				t.Fatal(err)
			}
		}
	}
	clock = clock.Add(48 * time.Hour)
	r := New(l, Options{})
	if _, err := r.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	b, _, _ := l.GetBucket(ctx, "bbb")
	_, has := b.Attrs[BucketAttr]
	if has || !rk.done.Load() {
		t.Fatalf("the test did not remove bucket bbb's rule during the pass (rule left: %v)", has)
	}
	for _, k := range []string{"k1", "k2"} {
		if _, err := l.Head(ctx, "bbb", k); err != nil {
			t.Errorf("bbb/%s deleted by a rule removed before the pass reached the bucket: %v", k, err)
		}
	}
}
