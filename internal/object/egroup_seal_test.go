package object

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

func (e *env) egroups() map[uint64]meta.Egroup {
	e.t.Helper()
	start := []byte(meta.PrefixEgroup)
	items, err := e.kv.Scan(context.Background(), start, meta.PrefixEnd(start), 0)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[uint64]meta.Egroup{}
	for _, it := range items {
		id, err := meta.ParseID(it.Key)
		if err != nil {
			e.t.Fatal(err)
		}
		var eg meta.Egroup
		if err := meta.Decode(it.Value, &eg); err != nil {
			e.t.Fatal(err)
		}
		out[id] = eg
	}
	return out
}

// Single-extent objects reuse pooled egroups; an egroup without room for
// the next extent is sealed, never grown past EgroupMaxBytes. (It once
// grew without bound: 60 one-MiB objects made one 60 MiB egroup.)
func TestPooledEgroupsStayUnderMax(t *testing.T) {
	e := newEnv(t)
	defer e.close()
	if err := e.l.CreateBucket(context.Background(), "bkt", "o", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	max := e.l.Options().EgroupMaxBytes
	for i := 0; i < 24; i++ {
		e.put("bkt", fmt.Sprintf("k%02d", i), payload(uint64(i), 200<<10), "any=1")
	}
	open := 0
	for id, eg := range e.egroups() {
		if eg.Size > max {
			t.Errorf("egroup %d: %d bytes, over the %d limit", id, eg.Size, max)
		}
		if eg.State == meta.EgroupOpen {
			open++
		}
	}
	if open > 1 {
		t.Errorf("%d open egroups after sequential writes, want at most 1", open)
	}
	for i := 0; i < 24; i++ {
		got, err := e.get("bkt", fmt.Sprintf("k%02d", i), 0, -1)
		if err != nil || !bytes.Equal(got, payload(uint64(i), 200<<10)) {
			t.Fatalf("k%02d: %v", i, err)
		}
	}
}

// failingIO fails every append while fail is set.
type failingIO struct {
	*Local
	fail atomic.Bool
}

func (f *failingIO) Append(ctx context.Context, r model.Replica, id uint64, off int64, enc []byte) error {
	if f.fail.Load() {
		return errors.New("injected append failure")
	}
	return f.Local.Append(ctx, r, id, off, enc)
}

func (f *failingIO) AppendSync(ctx context.Context, r model.Replica, id uint64, off int64, enc []byte) error {
	if err := f.Append(ctx, r, id, off, enc); err != nil {
		return err
	}
	return f.Local.Sync(ctx, r, id)
}

// A write that fails after breaking a pooled (recorded, open) egroup seals
// it: it never returns to the pool, and an egroup left open with a live
// writer node is out of the Curator's reach (no repair, no GC).
func TestFailedWriteSealsDroppedEgroup(t *testing.T) {
	e := newEnv(t)
	defer e.close()
	e.l.Close()
	fio := &failingIO{Local: e.local}
	l, err := New(e.kv, fio, e.local, Options{ExtentMaxBytes: 256 << 10, EgroupMaxBytes: 1 << 20, StatsInterval: 1})
	if err != nil {
		t.Fatal(err)
	}
	e.l = l
	ctx := context.Background()
	if err := l.CreateBucket(ctx, "bkt", "o", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	e.put("bkt", "first", payload(1, 10<<10), "any=1")
	var openID uint64
	for id, eg := range e.egroups() {
		if eg.State == meta.EgroupOpen {
			openID = id
		}
	}
	if openID == 0 {
		t.Fatal("no open pooled egroup after the first write")
	}
	fio.fail.Store(true)
	if _, err := l.Put(ctx, "bkt", "second", bytes.NewReader(payload(2, 10<<10)), PutOptions{Size: 10 << 10, Vector: model.MustParseVector("any=1")}); err == nil {
		t.Fatal("put succeeded with every append failing")
	}
	fio.fail.Store(false)
	if st := e.egroups()[openID].State; st != meta.EgroupSealed {
		t.Fatalf("egroup %d broken by a failed write is left in state %v, want sealed", openID, st)
	}
	got, err := e.get("bkt", "first", 0, -1)
	if err != nil || !bytes.Equal(got, payload(1, 10<<10)) {
		t.Fatalf("first object after the failed write: %v", err)
	}
	e.put("bkt", "third", payload(3, 10<<10), "any=1")
}
