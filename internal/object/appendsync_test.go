package object

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"

	"github.com/terrace-storage/terrace/internal/model"
)

// countingIO counts replica calls.
type countingIO struct {
	*Local
	appends, appendSyncs, syncs atomic.Int64
}

func (c *countingIO) Append(ctx context.Context, r model.Replica, id uint64, off int64, enc []byte) error {
	c.appends.Add(1)
	return c.Local.Append(ctx, r, id, off, enc)
}

func (c *countingIO) AppendSync(ctx context.Context, r model.Replica, id uint64, off int64, enc []byte) error {
	c.appendSyncs.Add(1)
	return c.Local.AppendSync(ctx, r, id, off, enc)
}

func (c *countingIO) Sync(ctx context.Context, r model.Replica, id uint64) error {
	c.syncs.Add(1)
	return c.Local.Sync(ctx, r, id)
}

// TestSmallPutIsOneCallPerReplica: a PUT that fits one chunk appends and
// syncs each replica in a single call (one round trip to a remote node);
// a multi-chunk PUT appends, then makes its last append durable with the
// same call and syncs only egroups that still need it.
func TestSmallPutIsOneCallPerReplica(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := &countingIO{Local: e.local}
	e.l.rio = c
	e.l.CreateBucket(ctx, "bkt", "", model.Vector{})
	for _, size := range []int64{4096, -1} {
		c.appends.Store(0)
		c.appendSyncs.Store(0)
		c.syncs.Store(0)
		data := payload(1, 4096)
		if _, err := e.l.Put(ctx, "bkt", "small", bytes.NewReader(data), PutOptions{Size: size, Vector: model.MustParseVector("ssd=1,hdd=1")}); err != nil {
			t.Fatal(err)
		}
		if c.appendSyncs.Load() != 2 || c.appends.Load() != 0 || c.syncs.Load() != 0 {
			t.Fatalf("size %d: %d appends, %d append+syncs, %d syncs; want 0, 2, 0", size, c.appends.Load(), c.appendSyncs.Load(), c.syncs.Load())
		}
	}
	// Several chunks (256 KiB extents in this env) in one egroup.
	c.appends.Store(0)
	c.appendSyncs.Store(0)
	c.syncs.Store(0)
	big := payload(2, 600<<10)
	if _, err := e.l.Put(ctx, "bkt", "big", bytes.NewReader(big), PutOptions{Size: int64(len(big)), Vector: model.MustParseVector("ssd=1,hdd=1")}); err != nil {
		t.Fatal(err)
	}
	if c.appendSyncs.Load() != 2 || c.appends.Load() != 4 {
		t.Fatalf("3-chunk put: %d appends, %d append+syncs, %d syncs", c.appends.Load(), c.appendSyncs.Load(), c.syncs.Load())
	}
	if got, err := e.get("bkt", "big", 0, -1); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("read back: %v", err)
	}
}
