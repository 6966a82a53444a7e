package object

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

// staleKV serves GetStale from a frozen copy of chosen keys, like an etcd
// member that has not yet applied the latest writes.
type staleKV struct {
	*meta.Pebble
	frozen map[string]meta.Item
}

func (s *staleKV) GetStale(ctx context.Context, key []byte) (meta.Item, error) {
	if it, ok := s.frozen[string(key)]; ok {
		return it, nil
	}
	return s.Pebble.Get(ctx, key)
}

var _ meta.StaleReader = (*staleKV)(nil)

// A reader whose stale view still points at a moved and deleted extent
// location retries with a linearizable read and returns the right bytes.
func TestStaleLocationIsRetried(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	skv := &staleKV{Pebble: e.kv, frozen: map[string]meta.Item{}}
	l, err := New(skv, e.local, e.local, Options{ExtentMaxBytes: 256 << 10, EgroupMaxBytes: 1 << 20, StatsInterval: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.CreateBucket(ctx, "bkt", "", model.Vector{})
	data := payload(11, 100<<10)
	if _, err := l.Put(ctx, "bkt", "k", bytes.NewReader(data), PutOptions{Size: int64(len(data)), Vector: model.MustParseVector("hdd=1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.SealIdle(ctx, 0); err != nil { // as the Curator does before moving data
		t.Fatal(err)
	}
	info, _ := l.Head(ctx, "bkt", "k")
	id := info.Extents[0].ID
	xItem, _ := e.kv.Get(ctx, meta.ExtentKey(id))
	var x meta.Extent
	meta.Decode(xItem.Value, &x)
	egItem, _ := e.kv.Get(ctx, meta.EgroupKey(x.Egroup))
	var eg meta.Egroup
	meta.Decode(egItem.Value, &eg)
	// Move the extent (as GC does), then delete the old egroup entirely.
	repackAndDelete(t, e, l, id, xItem.ModRev, x, replicasOf(eg.Replicas))
	// The stale view still sees the old extent record and egroup record.
	skv.frozen[string(meta.ExtentKey(id))] = xItem
	skv.frozen[string(meta.EgroupKey(x.Egroup))] = egItem
	_, rc, err := l.Get(ctx, "bkt", "k", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read through a stale location: err %v, equal %v", err, bytes.Equal(got, data))
	}
	if b, err := l.ReadExtent(ctx, id, 0, x.Len); err != nil || !bytes.Equal(b, data[:x.Len]) {
		t.Fatalf("ReadExtent through a stale location: %v", err)
	}
}

// repackAndDelete moves extent id into a fresh hdd egroup, as GC's
// compaction does, then deletes its old egroup's record and files.
func repackAndDelete(t *testing.T, e *env, l *Layer, id uint64, modRev int64, x meta.Extent, old []model.Replica) {
	t.Helper()
	ctx := context.Background()
	if _, err := l.Relocate(ctx, model.MustParseVector("hdd=1"), model.Vector{}, []ExtentMove{{ID: id, ModRev: modRev, Len: x.Len}}); err != nil {
		t.Fatal(err)
	}
	var del meta.Txn
	del.Del(meta.EgroupKey(x.Egroup))
	if _, err := e.kv.Commit(ctx, &del); err != nil {
		t.Fatal(err)
	}
	for _, r := range old {
		if err := e.local.Remove(ctx, r, x.Egroup); err != nil {
			t.Fatal(err)
		}
	}
}
