package object

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/meta"
)

// With an orphan grace (cluster mode), start-up recovery leaves replica
// files without an egroup record in place, removes them after the grace,
// and keeps any whose record was committed meanwhile (a peer's write that
// was between creating the file and committing).
func TestOrphanFilesWaitForTheGrace(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	dev := e.local.Devices()[0]
	st, _ := e.local.Store(dev.ID())
	const orphan, lateCommit, movedAway = 900001, 900002, 900003
	// movedAway's record lists another device only: its file here is a
	// leftover of a move and an orphan too.
	var moved meta.Txn
	moved.Put(meta.EgroupKey(movedAway), meta.Encode(meta.Egroup{
		Replicas: []meta.EgroupReplica{{Device: "n9/hdd0", Node: "n9", Tier: "hdd"}}, State: meta.EgroupSealed,
	}))
	if _, err := e.kv.Commit(ctx, &moved); err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint64{orphan, lateCommit, movedAway} {
		if err := st.Create(id); err != nil {
			t.Fatal(err)
		}
	}
	l, err := New(e.kv, e.local, e.local, Options{ExtentMaxBytes: 256 << 10, EgroupMaxBytes: 1 << 20, StatsInterval: 1,
		OrphanGrace: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rep, err := l.Recover(ctx, e.local)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OrphanFiles != 3 || rep.OrphanDeferred != 3 || rep.OrphanRemoved != 0 {
		t.Fatalf("recovery report %s, want 3 orphans deferred", rep)
	}
	if ids, _ := st.List(); !slices.Contains(ids, orphan) || !slices.Contains(ids, lateCommit) {
		t.Fatalf("orphan files removed before the grace: %v", ids)
	}
	// The peer's commit lands during the grace.
	var tx meta.Txn
	tx.Put(meta.EgroupKey(lateCommit), meta.Encode(meta.Egroup{
		Replicas: []meta.EgroupReplica{{Device: dev.ID(), Node: "n1", Tier: dev.Spec().Tier}}, State: meta.EgroupSealed,
	}))
	if _, err := e.kv.Commit(ctx, &tx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ids, _ := st.List()
		if !slices.Contains(ids, orphan) && !slices.Contains(ids, movedAway) {
			if !slices.Contains(ids, lateCommit) {
				t.Fatal("a file whose egroup was recorded during the grace was removed")
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("orphan still present long after the grace: %v", ids)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
