package lifecycle

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
)

// hookKV runs hook once, right after the first scan starting under
// prefix.
type hookKV struct {
	*meta.Pebble
	prefix []byte
	hook   func()
}

func (k *hookKV) Scan(ctx context.Context, start, end []byte, limit int) ([]meta.Item, error) {
	items, err := k.Pebble.Scan(ctx, start, end, limit)
	if h := k.hook; h != nil && bytes.HasPrefix(start, k.prefix) {
		k.hook = nil
		h()
	}
	return items, err
}

// A user rolls back by deleting the newest version by ID while a run is
// between its version listing and its noncurrent-expiry delete: the run
// deleted the version that had just become current, and the object was
// gone. The delete is now only of a version still noncurrent.
func TestNoncurrentExpiryRacesRollback(t *testing.T) {
	clock := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	now := func() time.Time { return clock }
	var kv *hookKV
	l := newLayerOver(t, now, func(p *meta.Pebble) meta.KV {
		kv = &hookKV{Pebble: p, prefix: meta.VersionPrefix("vers", "docs/a")}
		return kv
	})
	ctx := context.Background()
	if err := l.CreateBucket(ctx, "vers", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	if err := l.SetVersioning(ctx, "vers", object.VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Rules: []Rule{{ID: "old", Enabled: true, Prefix: "docs/", NoncurrentDays: 3}}}
	raw, _ := json.Marshal(cfg)
	if err := l.UpdateBucket(ctx, "vers", func(b *meta.Bucket) error { b.Attrs = map[string][]byte{BucketAttr: raw}; return nil }); err != nil {
		t.Fatal(err)
	}
	put := func(body string) string {
		info, err := l.Put(ctx, "vers", "docs/a", strings.NewReader(body), object.PutOptions{Size: int64(len(body))})
		if err != nil {
			t.Fatal(err)
		}
		return info.VersionID
	}
	put("good")
	clock = clock.Add(10 * 24 * time.Hour)
	bad := put("bad")
	clock = clock.Add(10 * 24 * time.Hour)
	kv.hook = func() {
		if _, err := l.DeleteObject(ctx, "vers", "docs/a", bad); err != nil { // roll back
			t.Errorf("rollback: %v", err)
		}
	}
	rep, err := New(l, Options{Now: now}).RunOnce(ctx)
	if kv.hook != nil {
		t.Fatal("hook did not run")
	}
	t.Logf("run: expired=%d err=%v", rep.NoncurrentExpired, err)
	if _, err := l.Head(ctx, "vers", "docs/a"); err != nil {
		t.Fatalf("after a rollback racing a lifecycle run the object is gone: %v", err)
	}
}
