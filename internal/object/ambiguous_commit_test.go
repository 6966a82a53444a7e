package object

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

// ambiguousKV applies a commit and then reports an error, as an etcd
// client does when the connection breaks after the request was sent
// ("connection reset by peer", a deadline): the caller cannot tell
// whether the transaction landed. Found by the chaos suite (seed 2): a
// PUT whose commit landed had its replica files removed by the writer's
// clean-up, leaving a listed object that no read could ever serve.
type ambiguousKV struct {
	*meta.Pebble
	failNext atomic.Bool
	// prefix selects the commit to fail: one writing a key under it
	// (nil: the object map).
	prefix []byte
}

var errAmbiguous = errors.New("rpc error: code = Unavailable desc = error reading from server: connection reset by peer")

// Commit fails ambiguously the next commit that writes a key under
// prefix (by default an object record: the PUT's final commit) once
// failNext is set.
func (a *ambiguousKV) Commit(ctx context.Context, t *meta.Txn) (int64, error) {
	rev, err := a.Pebble.Commit(ctx, t)
	if err != nil || !a.failNext.Load() {
		return rev, err
	}
	p := a.prefix
	if p == nil {
		p = []byte(meta.PrefixObject)
	}
	for _, op := range t.Ops {
		if bytes.HasPrefix(op.Key, p) && a.failNext.Swap(false) {
			return 0, errAmbiguous
		}
	}
	return rev, err
}

func readAll(t *testing.T, l *Layer, key string) ([]byte, error) {
	t.Helper()
	_, rc, err := l.Get(context.Background(), "bkt", key, 0, -1)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// TestAmbiguousCommitKeepsData: when a commit's outcome is unknown, the
// writer must not destroy data the commit may have made visible — neither
// remove a new egroup's files nor truncate a pooled egroup back to its
// last known size (the next writer would then write over the bytes the
// landed commit's extents point at).
func TestAmbiguousCommitKeepsData(t *testing.T) {
	for _, tc := range []struct {
		name string
		// warm writes an object first, so that the ambiguous write appends
		// to an egroup already in the pool.
		warm bool
	}{{"new egroup", false}, {"pooled egroup", true}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			akv := &ambiguousKV{Pebble: e.kv}
			l, err := New(akv, e.local, e.local, Options{StatsInterval: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			v := model.MustParseVector("hdd=2")
			if err := l.CreateBucket(ctx, "bkt", "", v); err != nil {
				t.Fatal(err)
			}
			put := func(key string, data []byte) error {
				_, err := l.Put(ctx, "bkt", key, bytes.NewReader(data), PutOptions{Size: int64(len(data)), Vector: v})
				return err
			}
			if tc.warm {
				if err := put("warm", payload(1, 70<<10)); err != nil {
					t.Fatal(err)
				}
			}
			data := payload(2, 100<<10)
			akv.failNext.Store(true)
			if err := put("k", data); err == nil {
				t.Fatal("the ambiguous commit reported success")
			}
			// The commit landed: the object exists and must read back.
			if _, err := l.Head(ctx, "bkt", "k"); err != nil {
				t.Fatalf("head after a landed commit: %v", err)
			}
			if got, err := readAll(t, l, "k"); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read after an ambiguous commit that landed: err %v, equal %v", err, bytes.Equal(got, data))
			}
			// Later writes must not overwrite its bytes.
			for i := 0; i < 3; i++ {
				if err := put("later", payload(uint64(10+i), 100<<10)); err != nil {
					t.Fatal(err)
				}
			}
			if got, err := readAll(t, l, "k"); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read after later writes: err %v, equal %v", err, bytes.Equal(got, data))
			}
			if tc.warm {
				if got, err := readAll(t, l, "warm"); err != nil || !bytes.Equal(got, payload(1, 70<<10)) {
					t.Fatalf("earlier object damaged: %v", err)
				}
			}
			// The egroup the writer sealed after the ambiguous commit
			// must state a length that covers the landed extents: a
			// restart truncates replicas to it.
			checkTails(t, e.kv)
			l2 := restartLayer(t, e, l)
			if got, err := readAll(t, l2, "k"); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read after a restart: err %v, equal %v", err, bytes.Equal(got, data))
			}
		})
	}
}
