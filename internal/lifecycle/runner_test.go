package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/device"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/placement"
)

// newLayer is a real object layer: Pebble and two directory devices.
func newLayer(t *testing.T, now func() time.Time) *object.Layer {
	t.Helper()
	return newLayerOver(t, now, nil)
}

// newLayerOver is newLayer over wrap(Pebble) (nil: Pebble itself), a
// store that injects a concurrent change.
func newLayerOver(t *testing.T, now func() time.Time, wrap func(*meta.Pebble) meta.KV) *object.Layer {
	t.Helper()
	dir := t.TempDir()
	var devs []*device.Device
	for i, tier := range []string{"ssd", "hdd"} {
		sp, err := device.ParseSpec(fmt.Sprintf("%s:%s:1GiB", tier, filepath.Join(dir, fmt.Sprint(i))))
		if err != nil {
			t.Fatal(err)
		}
		d, err := device.Open(model.DeviceID(fmt.Sprintf("n1/%s0", tier)), sp)
		if err != nil {
			t.Fatal(err)
		}
		devs = append(devs, d)
	}
	kv, err := meta.OpenPebble(filepath.Join(dir, "meta"))
	if err != nil {
		t.Fatal(err)
	}
	var store meta.KV = kv
	if wrap != nil {
		store = wrap(kv)
	}
	local := object.NewLocal("n1", "r1", devs)
	pol, _ := placement.New(placement.Config{Name: "moop"})
	l, err := object.New(store, local, local, object.Options{Policy: pol, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(); kv.Close() })
	return l
}

// TestNoncurrentVersionsExpire: on a real versioned bucket, a version
// is removed NoncurrentDays after it was replaced — not after it was
// written; the current version stays; a delete marker that is the only
// version left goes; a dry run reports the same without acting.
func TestNoncurrentVersionsExpire(t *testing.T) {
	clock := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	now := func() time.Time { return clock }
	l := newLayer(t, now)
	ctx := context.Background()
	if err := l.CreateBucket(ctx, "vers", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	if err := l.SetVersioning(ctx, "vers", object.VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	put := func(key, body string) string {
		info, err := l.Put(ctx, "vers", key, strings.NewReader(body), object.PutOptions{Size: int64(len(body))})
		if err != nil {
			t.Fatal(err)
		}
		return info.VersionID
	}
	cfg := Config{Rules: []Rule{{ID: "old-versions", Enabled: true, Prefix: "docs/", NoncurrentDays: 3,
		Expiration: &Expiration{DeleteMarker: true}}}}
	raw, _ := json.Marshal(cfg)
	if err := l.UpdateBucket(ctx, "vers", func(b *meta.Bucket) error {
		b.Attrs = map[string][]byte{BucketAttr: raw}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	v1 := put("docs/a", "one") // day 0
	clock = clock.Add(10 * 24 * time.Hour)
	v2 := put("docs/a", "two") // day 10: v1 noncurrent from now
	put("logs/a", "x")
	put("logs/a", "y") // outside the rule's prefix
	put("docs/gone", "z")
	clock = clock.Add(time.Hour)
	if _, err := l.DeleteObject(ctx, "vers", "docs/gone", ""); err != nil { // a marker over z
		t.Fatal(err)
	}
	r := New(l, Options{Now: now})

	// Day 12: v1 has been noncurrent 2 days — kept, although written 12
	// days ago.
	clock = clock.Add(2 * 24 * time.Hour)
	rep, err := r.RunOnce(ctx)
	if err != nil || rep.NoncurrentExpired != 0 || rep.Markers != 0 {
		t.Fatalf("day 12: %+v %v", rep, err)
	}
	// Day 14: due (3 days after day 10, rounded up to midnight).
	clock = clock.Add(2 * 24 * time.Hour)
	dry, err := r.Pending(ctx)
	if err != nil || dry.NoncurrentExpired != 0 || len(dry.Rules) != 1 || dry.Rules[0].NoncurrentExpire != 2 {
		t.Fatalf("dry run: %+v %v", dry, err)
	}
	if _, rc, err := l.GetVersion(ctx, "vers", "docs/a", v1, 0, -1); err != nil {
		t.Fatalf("a dry run removed v1: %v", err)
	} else {
		rc.Close()
	}
	rep, err = r.RunOnce(ctx)
	if err != nil || rep.NoncurrentExpired != 2 {
		t.Fatalf("day 14: %+v %v", rep, err)
	}
	if _, _, err := l.GetVersion(ctx, "vers", "docs/a", v1, 0, -1); err == nil {
		t.Fatal("v1 survived")
	}
	if _, rc, err := l.GetVersion(ctx, "vers", "docs/a", v2, 0, -1); err != nil {
		t.Fatalf("the current version went: %v", err)
	} else {
		b, _ := io.ReadAll(rc)
		rc.Close()
		if string(b) != "two" {
			t.Fatalf("current version reads %q", b)
		}
	}
	vs, err := l.ListVersions(ctx, "vers", object.VersionListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range vs.Versions {
		got = append(got, fmt.Sprintf("%s:%v", v.Key, v.DeleteMarker))
	}
	// docs/gone's z was removed (noncurrent since the marker); its marker,
	// then alone, goes on the next run.
	if s := strings.Join(got, " "); s != "docs/a:false docs/gone:true logs/a:false logs/a:false" {
		t.Fatalf("versions after day 14: %s", s)
	}
	rep, err = r.RunOnce(ctx)
	if err != nil || rep.Markers != 1 {
		t.Fatalf("second run: %+v %v", rep, err)
	}
	vs, _ = l.ListVersions(ctx, "vers", object.VersionListOptions{Prefix: "docs/gone"})
	if len(vs.Versions) != 0 {
		t.Fatalf("lone marker left: %+v", vs.Versions)
	}
}
