package actuate

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/extent"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
)

// twoHDD: one node, ssd0 + hdd0 + hdd1; vector hdd=2 fills both hdds.
func twoHDD(t *testing.T) *env { return newEnvOn(t, "ssd0", "hdd0", "hdd1") }

func (e *env) flip(dev model.DeviceID, id uint64, off int64) {
	p := filepath.Join(e.dir, string(dev)[len("n1/"):], extent.FileName(id))
	b, err := os.ReadFile(p)
	if err != nil {
		e.t.Fatal(err)
	}
	if off < 0 {
		off += int64(len(b))
	}
	b[off] ^= 0x40
	if err := os.WriteFile(p, b, 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// TestRecoveryKeepsABadReplicasOnlyGoodSlices: one good replica (A, with
// a latent corrupt slice in extent 1) and one replica marked bad (B,
// corrupt in extent 2); every byte is still held by some replica. With no
// other hdd, recovery must repair B in place; the copy must not truncate
// B's file (the only good copy of extent 1) before finding that A does
// not verify. The object stays readable.
func TestRecoveryKeepsABadReplicasOnlyGoodSlices(t *testing.T) {
	e := twoHDD(t)
	ctx := context.Background()
	want := data(11, 300<<10)
	id, eg, _ := e.put("k", want)
	a, b := eg.Replicas[0].Device, eg.Replicas[1].Device
	e.flip(a, id, 5000) // extent 1 on A: latent
	e.flip(b, id, -500) // extent 2 on B
	e.l.MarkReplicaBad(ctx, id, b)

	v := e.view(id)
	tasks, err := decide.Recovery(e.l.Snapshot(), v, func() placement.Policy { p, _ := placement.New(placement.Config{Name: "fitness"}); return p }(), rand.New(rand.NewPCG(1, 2)))
	if err != nil || len(tasks) != 1 {
		t.Fatalf("recovery: %v %v", tasks, err)
	}
	t.Logf("decided: %s", tasks[0])
	_, err = e.act.Execute(ctx, FromDecide(tasks[0]))
	t.Logf("execute: %v", err)
	t.Logf("file on bad replica's device %s exists after the failed recovery: %v", b, e.fileExists(b, id))
	got, err := e.readAll("k")
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("object unreadable after recovery (every byte had a good copy before it): %v", err)
	}
}
