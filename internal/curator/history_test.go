package curator

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
)

func (e *env) readFrom(bucket, key string) []byte {
	e.t.Helper()
	_, rc, err := e.l.Get(context.Background(), bucket, key, 0, -1)
	if err != nil {
		e.t.Fatalf("get %s/%s: %v", bucket, key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		e.t.Fatalf("read %s/%s: %v", bucket, key, err)
	}
	return b
}

// TestHistorySurvivesGCAndIsFreedWithIt: objects a snapshot, a clone and
// S3 versioning still reach keep their bytes through repeated full scans
// (data removal and compaction), however the live bucket changes; once
// the last reference goes, the scans reclaim the space.
func TestHistorySurvivesGCAndIsFreedWithIt(t *testing.T) {
	e := newEnv(t, "ssd:%s:1GiB", "hdd:%s:1GiB", "hdd:%s:1GiB")
	ctx := context.Background()
	old := map[string][]byte{}
	for i := range 40 {
		k := fmt.Sprintf("k%02d", i)
		old[k] = data(uint64(i), 20000+i*311)
		e.put(k, old[k], "ssd=1,hdd=1")
	}
	snap, err := e.l.CreateSnapshot(ctx, "bkt", "before")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.l.Clone(ctx, "bkt", "before", "bkt-clone"); err != nil {
		t.Fatal(err)
	}
	// The live bucket moves on: half overwritten, half deleted.
	for i := range 40 {
		k := fmt.Sprintf("k%02d", i)
		if i%2 == 0 {
			e.put(k, data(uint64(i+100), 3000), "ssd=1,hdd=1")
		} else if err := e.l.Delete(ctx, "bkt", k); err != nil {
			t.Fatal(err)
		}
	}
	usedWith := e.used()
	for range 3 {
		e.run("full")
	}
	for k, b := range old {
		if got := e.readFrom(snap.Served, k); !bytes.Equal(got, b) {
			t.Fatalf("snapshot %s lost %s after GC", snap.Served, k)
		}
		if got := e.readFrom("bkt-clone", k); !bytes.Equal(got, b) {
			t.Fatalf("clone lost %s after GC", k)
		}
	}
	// Drop every reference to the old data: the snapshot and the clone.
	if err := e.l.DeleteSnapshot(ctx, "bkt", "before"); err != nil {
		t.Fatal(err)
	}
	for k := range old {
		e.l.Delete(ctx, "bkt-clone", k)
	}
	if err := e.l.DeleteBucket(ctx, "bkt-clone"); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		e.run("full")
	}
	usedAfter := e.used()
	t.Logf("device bytes with history %d, after dropping it %d", usedWith, usedAfter)
	if usedAfter >= usedWith/2 {
		t.Fatalf("space not reclaimed: %d bytes before, %d after", usedWith, usedAfter)
	}
	for i := 0; i < 40; i += 2 {
		k := fmt.Sprintf("k%02d", i)
		if got := e.readFrom("bkt", k); !bytes.Equal(got, data(uint64(i+100), 3000)) {
			t.Fatalf("live %s damaged", k)
		}
	}
}

// TestVersionsSurviveGC: noncurrent S3 versions are references too.
func TestVersionsSurviveGC(t *testing.T) {
	e := newEnv(t, "ssd:%s:1GiB", "hdd:%s:1GiB")
	ctx := context.Background()
	if err := e.l.SetVersioning(ctx, "bkt", object.VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 5 {
		b := data(uint64(i), 30000)
		info, err := e.l.Put(ctx, "bkt", "k", bytes.NewReader(b), object.PutOptions{Size: int64(len(b)), Vector: model.MustParseVector("ssd=1,hdd=1")})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, info.VersionID)
	}
	e.l.Delete(ctx, "bkt", "k")
	for range 3 {
		e.run("full")
	}
	for i, id := range ids {
		_, rc, err := e.l.GetVersion(ctx, "bkt", "k", id, 0, -1)
		if err != nil {
			t.Fatalf("version %d: %v", i, err)
		}
		got, _ := io.ReadAll(rc)
		rc.Close()
		if !bytes.Equal(got, data(uint64(i), 30000)) {
			t.Fatalf("version %d damaged by GC", i)
		}
	}
}

func (e *env) used() int64 {
	var n int64
	for _, d := range e.devs {
		n += d.Used()
	}
	return n
}
