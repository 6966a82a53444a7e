package actuate

import (
	"context"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
)

// TestRemoveReplicasAfterDeviceFailure: an over-replicated egroup (3
// replicas, vector hdd=2) gets a remove-replicas task. Before it runs
// (later in the job, or from a node queue), the devices of the two
// replicas it keeps fail. A device failure does not touch the egroup
// record, so the revision check passes; the task must still not delete
// the only replica on a working device.
func TestRemoveReplicasAfterDeviceFailure(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	want := data(21, 300<<10)
	id, eg, rev := e.put("k", want)
	// A third replica (e.g. a node that came back, a lowered vector).
	third := e.spare(eg, "hdd")
	if _, err := e.act.Execute(ctx, Task{Kind: KindRecover, Egroup: id, ModRev: rev, Bytes: eg.Size, Add: []model.Replica{third}}); err != nil {
		t.Fatal(err)
	}
	p, _ := placement.New(placement.Config{Name: "fitness"})
	tasks, err := decide.Recovery(e.l.Snapshot(), e.view(id), p, rand.New(rand.NewPCG(3, 4)))
	if err != nil || len(tasks) != 1 || tasks[0].Kind != decide.KindRemoveReplicas {
		t.Fatalf("recovery: %v %v", tasks, err)
	}
	t.Logf("decided: %s", tasks[0])
	removed := tasks[0].Remove[0].Device
	for _, r := range e.view(id).Replicas {
		if r.Device != removed {
			e.devs[r.Device].MarkFailed()
			t.Logf("device %s fails before the task runs", r.Device)
		}
	}
	_, err = e.act.Execute(ctx, FromDecide(tasks[0]))
	t.Logf("execute: %v", err)
	if _, err := e.readAll("k"); err != nil {
		t.Fatalf("data lost: the task deleted the only replica on a healthy device: %v", err)
	}
}

// failAfterCopy marks the destination device failed once the copy to it
// has verified (the device dies between copy and switch).
type failAfterCopy struct {
	*env
}

func (f failAfterCopy) store() Store { return failStore{f.env.l, f.env} }

type failStore struct {
	Store
	e *env
}

func (s failStore) CopyReplica(ctx context.Context, id uint64, size int64, src, dst model.Replica) error {
	err := s.Store.CopyReplica(ctx, id, size, src, dst)
	s.e.devs[dst.Device].MarkFailed()
	return err
}

// TestMoveOntoDeviceThatFailedAfterCopy: a balancing move's destination
// device fails between the verified copy and the switch. The move must
// not list the failed copy and delete its good source.
func TestMoveOntoDeviceThatFailedAfterCopy(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	id, eg, rev := e.put("k", data(22, 300<<10))
	to := e.spare(eg, "hdd")
	a := New(failAfterCopy{e}.store(), NewScheduler(Limits{}, 1e12, Signals{}), nil)
	_, err := a.Execute(ctx, Task{Kind: KindPlanned, Egroup: id, ModRev: rev, Bytes: eg.Size, Add: []model.Replica{to}, Remove: []model.Replica{eg.Replicas[0].Replica()}})
	after, _, _ := e.l.Egroup(ctx, id)
	healthy := 0
	for _, r := range after.Replicas {
		if !e.devs[r.Device].Failed() && !r.Bad {
			healthy++
		}
	}
	t.Logf("execute: %v; replicas after: %+v; source file kept: %v", err, after.Replicas, e.fileExists(eg.Replicas[0].Device, id))
	if healthy < 2 {
		t.Fatalf("balancing move left %d healthy replica(s) of 2: it deleted a good source after its copy's device failed", healthy)
	}
}

// view is the egroup as the Curator's decisions see it.
func (e *env) view(id uint64) decide.Egroup {
	eg, rev, err := e.l.Egroup(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	v := decide.Egroup{ID: id, ModRev: rev, Size: eg.Size, Vector: eg.Vector}
	for _, r := range eg.Replicas {
		v.Replicas = append(v.Replicas, decide.Replica{Replica: r.Replica(), Bad: r.Bad})
	}
	return v
}

func (e *env) readAll(key string) ([]byte, error) {
	_, rc, err := e.l.Get(context.Background(), "bkt", key, 0, -1)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}
