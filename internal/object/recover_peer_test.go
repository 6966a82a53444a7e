package object

import (
	"context"
	"testing"

	"github.com/terrace-storage/terrace/internal/extent"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

// TestRecoveryKeepsAPeersUncommittedAppend: start-up recovery must not
// truncate a replica of an egroup another node is writing. The peer may
// have appended and synced bytes here (the replica RPC serves during
// recovery) and be about to commit them; truncating to the size recovery
// read a moment earlier silently drops a replica of an acknowledged write.
// Found by the chaos suite: after a restart, a read found "egroup … ends
// at 4094664, extent needs 4097624" on the restarted node's replica.
// Bytes of this node's own open egroups (its writers died with it) are
// still truncated.
func TestRecoveryKeepsAPeersUncommittedAppend(t *testing.T) {
	for _, tc := range []struct {
		writer   model.NodeID
		truncate bool
	}{{"n2", false}, {"n1", true}} {
		t.Run("writer "+string(tc.writer), func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			e.l.CreateBucket(ctx, "bkt", "", model.Vector{})
			e.put("bkt", "k", payload(1, 100<<10), "hdd=2")
			loc, err := e.l.Locate(ctx, "bkt", "k")
			if err != nil {
				t.Fatal(err)
			}
			id := loc.Extents[0].Egroup
			var eg meta.Egroup
			rev, err := meta.GetRecord(ctx, e.kv, meta.EgroupKey(id), &eg)
			if err != nil {
				t.Fatal(err)
			}
			// The egroup is open and being written by tc.writer.
			eg.State, eg.Writer = meta.EgroupOpen, tc.writer
			var txn meta.Txn
			txn.If(meta.EgroupKey(id), rev)
			txn.Put(meta.EgroupKey(id), meta.Encode(eg))
			if _, err := e.kv.Commit(ctx, &txn); err != nil {
				t.Fatal(err)
			}
			// The writer's next chunk: appended and synced on every replica,
			// its commit not landed yet.
			chunk := extent.Encode(nil, payload(2, 30<<10))
			want := eg.Size + int64(len(chunk))
			for _, r := range eg.Replicas {
				st, _ := e.local.Store(r.Device)
				if err := st.Append(id, eg.Size, chunk); err != nil {
					t.Fatal(err)
				}
				if err := st.Sync(id); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := e.l.Recover(ctx, e.local); err != nil {
				t.Fatal(err)
			}
			for _, r := range eg.Replicas {
				st, _ := e.local.Store(r.Device)
				sz, err := st.Size(id)
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case tc.truncate && sz != eg.Size:
					t.Errorf("%s: own egroup's uncommitted tail kept: size %d, committed %d", r.Device, sz, eg.Size)
				case !tc.truncate && sz != want:
					t.Errorf("%s: a peer's synced append was truncated: size %d, want %d", r.Device, sz, want)
				}
			}
		})
	}
}
