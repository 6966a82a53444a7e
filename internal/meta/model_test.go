package meta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync/atomic"
	"testing"
)

// kvModel is the reference semantics of KV.Commit: etcd-style per-key
// modification revisions, all-or-nothing transactions, one revision per
// successful commit, ops applied in order.
type kvModel struct {
	rev  int64
	vals map[string]Item
}

func (m *kvModel) commit(t *Txn) (int64, error) {
	for _, c := range t.Cmps {
		if m.vals[string(c.Key)].ModRev != c.ModRev {
			return 0, ErrConflict
		}
	}
	m.rev++
	for _, op := range t.Ops {
		if op.Delete {
			delete(m.vals, string(op.Key))
			continue
		}
		m.vals[string(op.Key)] = Item{Key: op.Key, Value: op.Value, ModRev: m.rev}
	}
	return m.rev, nil
}

var modelNamespaces atomic.Int64

// runModel interprets prog as a sequence of transactions over 8 keys,
// commits each to kv and to the model, and fails on any difference in
// outcome, revision or resulting state (values, ModRevs, scans).
func runModel(t testing.TB, kv *Pebble, prog []byte) {
	ctx := context.Background()
	ns := fmt.Sprintf("o/m%d/", modelNamespaces.Add(1))
	key := func(b byte) []byte { return []byte(fmt.Sprintf("%sk%d", ns, b&7)) }
	m := &kvModel{rev: kv.Rev(), vals: map[string]Item{}}
	var history []int64 // revisions seen, for stale compares
	next := func() byte {
		if len(prog) == 0 {
			return 0
		}
		b := prog[0]
		prog = prog[1:]
		return b
	}
	for steps := 0; len(prog) > 0 && steps < 64; steps++ {
		hdr := next()
		var tx Txn
		for i := 0; i < int(hdr&3); i++ {
			b := next()
			k := key(b)
			cur := m.vals[string(k)].ModRev
			var rev int64
			switch (b >> 3) & 3 {
			case 0:
				rev = cur // holds
			case 1:
				rev = 0 // "absent"
			case 2:
				rev = cur + 1 // a future revision
			case 3:
				if len(history) > 0 {
					rev = history[int(b>>5)%len(history)]
				}
			}
			tx.If(k, rev)
		}
		for i := 0; i < 1+int(hdr>>2&3); i++ {
			b := next()
			if b&8 != 0 {
				tx.Del(key(b))
			} else {
				tx.Put(key(b), []byte{b, hdr})
			}
		}
		wantRev, wantErr := m.commit(&tx)
		gotRev, gotErr := kv.Commit(ctx, &tx)
		if !errors.Is(gotErr, wantErr) || (wantErr == nil && gotErr != nil) || gotRev != wantRev {
			t.Fatalf("step %d: txn %+v: got (%d, %v), model says (%d, %v)", steps, tx, gotRev, gotErr, wantRev, wantErr)
		}
		if gotErr == nil {
			history = append(history, gotRev)
		}
		checkModel(t, kv, m, ns)
	}
}

func checkModel(t testing.TB, kv *Pebble, m *kvModel, ns string) {
	t.Helper()
	ctx := context.Background()
	items, err := kv.Scan(ctx, []byte(ns), PrefixEnd([]byte(ns)), 0)
	if err != nil {
		t.Fatal(err)
	}
	var want []Item
	for _, it := range m.vals {
		want = append(want, it)
	}
	sort.Slice(want, func(i, j int) bool { return bytes.Compare(want[i].Key, want[j].Key) < 0 })
	if len(items) != len(want) {
		t.Fatalf("scan has %d keys, model %d", len(items), len(want))
	}
	for i := range items {
		if !bytes.Equal(items[i].Key, want[i].Key) || !bytes.Equal(items[i].Value, want[i].Value) || items[i].ModRev != want[i].ModRev {
			t.Fatalf("scan item %d: %+v, model %+v", i, items[i], want[i])
		}
	}
	for k := byte(0); k < 8; k++ {
		key := []byte(fmt.Sprintf("%sk%d", ns, k))
		it, err := kv.Get(ctx, key)
		w, ok := m.vals[string(key)]
		if !ok {
			if !errors.Is(err, ErrNotFound) {
				t.Fatalf("get %s: %+v %v, model: absent", key, it, err)
			}
			continue
		}
		if err != nil || !bytes.Equal(it.Value, w.Value) || it.ModRev != w.ModRev {
			t.Fatalf("get %s: %+v %v, model %+v", key, it, err, w)
		}
	}
	if kv.Rev() != m.rev {
		t.Fatalf("store rev %d, model %d", kv.Rev(), m.rev)
	}
}

// TestTxnMatchesModel runs random transaction programs against Pebble and
// the map model.
func TestTxnMatchesModel(t *testing.T) {
	kv, _ := openTest(t)
	n := 60
	if testing.Short() {
		n = 10
	}
	for seed := 0; seed < n; seed++ {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		prog := make([]byte, 40+rng.IntN(120))
		for i := range prog {
			prog[i] = byte(rng.Uint32())
		}
		runModel(t, kv, prog)
	}
}

// FuzzTxnModel: go test -fuzz FuzzTxnModel ./internal/meta
func FuzzTxnModel(f *testing.F) {
	f.Add([]byte{0x01, 0x00, 0x00})                         // create-if-absent
	f.Add([]byte{0x05, 0x00, 0x00, 0x01, 0x08, 0x00})       // put, then CAS on the current rev
	f.Add([]byte{0x04, 0x00, 0x08, 0x01, 0x10, 0x00})       // put+delete in one txn, then "absent" compare
	f.Add([]byte{0x0d, 0x01, 0x02, 0x03, 0x0a, 0x63, 0x09}) // several ops, stale history compare
	f.Add([]byte{0x03, 0x18, 0x38, 0x01, 0x0f, 0x0f, 0x0f}) // future revisions
	kv, err := OpenPebble(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { kv.Close() })
	f.Fuzz(func(t *testing.T, prog []byte) {
		runModel(t, kv, prog)
	})
}
