package actuate

import (
	"context"
	"sync"
	"testing"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
)

// oldMaster copies, then loses its lease at the switch once the new
// master has found its copy.
type oldMaster struct {
	*object.Layer
	copied, bPulled chan struct{}
}

func (o oldMaster) SwitchEgroup(ctx context.Context, id uint64, rev int64, next meta.Egroup) error {
	close(o.copied)
	<-o.bPulled
	return context.Canceled
}

// newMaster runs the same move after the old one copied, keeps the
// verified copy it finds, and switches once the old master gave up.
type newMaster struct {
	*object.Layer
	copied, bPulled, aDone chan struct{}
	once                   *sync.Once
}

func (n newMaster) CopyReplica(ctx context.Context, id uint64, size int64, src, dst model.Replica) error {
	<-n.copied
	err := n.Layer.CopyReplica(ctx, id, size, src, dst)
	n.once.Do(func() { close(n.bPulled) })
	return err
}

func (n newMaster) SwitchEgroup(ctx context.Context, id uint64, rev int64, next meta.Egroup) error {
	<-n.aDone
	return n.Layer.SwitchEgroup(ctx, id, rev, next)
}

// TestTwoExecutorsOfOneMove: a Curator master that lost its lease and
// the master that resumed its job run the same move. The new one keeps
// the old one's verified copy; the old one, failing, deleted that copy as
// its own, and the new one then listed a replica whose file was gone (and
// removed the source). A failed move now fences the egroup record before
// deleting its copies: the new master's switch is stale instead, and
// every listed replica has its file.
func TestTwoExecutorsOfOneMove(t *testing.T) {
	e := newEnv(t)
	id, eg, rev := e.put("k", data(7, 300<<10))
	from, to := eg.Replicas[0].Replica(), e.spare(eg, "ssd")
	task := Task{Kind: KindTierUp, Egroup: id, ModRev: rev, Bytes: eg.Size, Add: []model.Replica{to}, Remove: []model.Replica{from}}
	copied, pulled, aDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	a := New(oldMaster{e.l, copied, pulled}, NewScheduler(Limits{}, 1e12, Signals{}), nil)
	b := New(newMaster{e.l, copied, pulled, aDone, &sync.Once{}}, NewScheduler(Limits{}, 1e12, Signals{}), nil)
	go func() {
		a.Execute(context.Background(), task)
		close(aDone)
	}()
	b.Execute(context.Background(), task) // stale now, or done; either way nothing lost
	after, _, err := e.l.Egroup(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range after.Replicas {
		if !e.fileExists(r.Device, id) {
			t.Errorf("replica on %s is listed but its file is gone", r.Device)
		}
	}
	if len(after.Replicas) != len(eg.Replicas) {
		t.Errorf("%d replicas after the move, want %d", len(after.Replicas), len(eg.Replicas))
	}
}
