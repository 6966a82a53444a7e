package curator

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/actuate"
	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/model"
)

// TestPlanWhatIfAndApply: a what-if failure of a device plans moves for
// exactly the replicas on it and none onto it, without moving anything;
// a rule what-if changes the plan; applying a plan runs it as a job whose
// moves carry their rules and leave every object readable.
func TestPlanWhatIfAndApply(t *testing.T) {
	e := newEnv(t, "ssd:%s:1GiB", "hdd:%s:1GiB", "hdd:%s:1GiB", "hdd:%s:1GiB")
	ctx := context.Background()
	objs := map[string][]byte{}
	for i := range 30 {
		k := fmt.Sprintf("k%02d", i)
		objs[k] = data(uint64(i), 40000)
		e.put(k, objs[k], "hdd=2")
	}
	e.l.SealIdle(ctx, -1)
	victim := e.devs[1].ID() // an hdd
	on := 0
	res, _ := e.c.scan(ctx, false)
	for _, eg := range res.egroups {
		for _, r := range eg.Replicas {
			if r.Device == victim {
				on++
			}
		}
	}
	if on == 0 {
		t.Fatal("no replica on the victim device: the test proves nothing")
	}
	p, err := e.c.Plan(ctx, "", []WhatIf{{Kind: "fail", Target: string(victim)}})
	if err != nil {
		t.Fatal(err)
	}
	from := 0
	for _, mv := range p.Moves {
		if mv.To == string(victim) {
			t.Fatalf("a move onto the failed device: %+v", mv)
		}
		if mv.From == string(victim) || mv.From == "" {
			from++
		}
		if len(mv.Rules) == 0 {
			t.Fatalf("a move without a reason: %+v", mv)
		}
	}
	if from < on {
		t.Fatalf("%d moves off the failed device for %d replicas on it", from, on)
	}
	// Nothing moved: the what-if changed only a copy of the model.
	if p2, err := e.c.Plan(ctx, "", nil); err != nil || len(p2.Moves) != 0 {
		t.Fatalf("plan without the what-if: %d moves, %v (want none: the layout is fine)", len(p2.Moves), err)
	}
	// Two of three hdds gone: hdd=2 data cannot be fully protected, and
	// the plan says so instead of pretending.
	p3, err := e.c.Plan(ctx, "", []WhatIf{{Kind: "fail", Target: string(e.devs[1].ID())}, {Kind: "fail", Target: string(e.devs[2].ID())}})
	if err != nil {
		t.Fatal(err)
	}
	if len(p3.Unresolved)+len(p3.Stranded) == 0 {
		t.Fatal("an impossible layout was not reported")
	}
	// A rule what-if replaces the configured rule of that name.
	p4, err := e.c.Plan(ctx, "", []WhatIf{{Kind: "rule", Target: "device_has_space max_fill=0.5"}})
	if err != nil || !strings.Contains(p4.Rules, "max_fill=0.5") {
		t.Fatalf("rule what-if: %v, rules %q", err, p4.Rules)
	}
	if _, err := e.c.Plan(ctx, "", []WhatIf{{Kind: "rule", Target: "no_such_rule"}}); err == nil || !strings.Contains(err.Error(), "no_such_rule") {
		t.Fatalf("unknown rule: %v", err)
	}
	// Really drain the victim, apply, wait: its replicas leave.
	e.devs[1].MarkFailed()
	applied, prog, err := e.c.ApplyPlan(ctx, "", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(applied.Tasks) == 0 || prog.Tasks != len(applied.Tasks) {
		t.Fatalf("apply: %d tasks, progress %+v", len(applied.Tasks), prog)
	}
	jobs, err := e.c.JobProgress(ctx, 5)
	if err != nil || len(jobs) == 0 {
		t.Fatalf("jobs: %v, %v", jobs, err)
	}
	var done *actuate.Progress
	for i := range jobs {
		if jobs[i].Kind == "plan" {
			done = &jobs[i]
		}
	}
	if done == nil || done.States["done"] == 0 || done.States["pending"] != 0 || done.Rules["rplset_durable"] == 0 {
		t.Fatalf("planned job: %+v", done)
	}
	res, _ = e.c.scan(ctx, false)
	for _, eg := range res.egroups {
		good := 0
		for _, r := range eg.Replicas {
			if r.Device == victim {
				t.Fatalf("egroup %x still lists the failed device", eg.ID)
			}
			good++
		}
		if eg.Size > 0 && good < 2 {
			t.Fatalf("egroup %x has %d replicas", eg.ID, good)
		}
	}
	for k, b := range objs {
		e.check(k, b)
	}
	_ = model.DeviceFailed
}

// The live model's device load is what its replicas carry (reads over
// the hot window), in the egroups' unit — not the device's probed speed,
// which the cluster snapshot reports as ReadBps/WriteBps — so
// load_balanced on the live cluster balances reads. A device with no
// replicas (a node that just joined) has no load.
func TestPlannerModelDeviceLoadIsReplicaLoad(t *testing.T) {
	c := &Curator{}
	var devs []model.Device
	for _, id := range []string{"n1/hdd0", "n2/hdd0", "n3/hdd0"} {
		devs = append(devs, model.Device{ID: model.DeviceID(id), Node: model.NodeID(id[:2]), Tier: "hdd", State: model.DeviceUp,
			CapacityBytes: 1 << 30, UsedBytes: 1 << 20, ReadBps: 150e6, WriteBps: 150e6})
	}
	snap := model.NewSnapshot(time.Unix(1000, 0), nil, devs)
	rep := func(d string) decide.Replica {
		return decide.Replica{Replica: model.Replica{Device: model.DeviceID(d), Node: model.NodeID(d[:2])}}
	}
	vec := model.MustParseVector("any=2")
	res := &scanResult{bucketOf: map[uint64]string{}, egroups: []decide.Egroup{
		{ID: 1, Size: 1 << 20, Vector: vec, Reads: 600, Replicas: []decide.Replica{rep("n1/hdd0"), rep("n2/hdd0")}},
		{ID: 2, Size: 1 << 20, Vector: vec, Reads: 60, Replicas: []decide.Replica{rep("n1/hdd0"), rep("n2/hdd0")}},
		{ID: 3, Size: 1 << 20, Vector: vec, Replicas: []decide.Replica{rep("n1/hdd0"), rep("n2/hdd0")}},
	}}
	m, _ := c.plannerModel(res, snap)
	// The default hot window is 600 s: 600 reads of 1 MiB are 1 MiB/s.
	want := map[model.DeviceID]float64{"n1/hdd0": 1.1 * (1 << 20), "n2/hdd0": 1.1 * (1 << 20), "n3/hdd0": 0}
	for _, d := range m.Devices {
		if math.Abs(d.Load-want[d.ID]) > 1e-6 {
			t.Errorf("device %s load %v, want %v (probed speed %v must not count)", d.ID, d.Load, want[d.ID], 300e6)
		}
	}
	if m.Egroups[0].Load != 1<<20 || m.Egroups[2].Load != 0 {
		t.Errorf("egroup loads %v, %v", m.Egroups[0].Load, m.Egroups[2].Load)
	}
}

// TestLivePlanLeavesDemotedReplicasAlone: an egroup tiering demoted to the
// remote tier keeps its remote replica through the next job's live plan.
// Found in test/tiering (the layout below is its): the plan pulled the
// egroup's hdd replica onto the emptier hdd and then moved the remote
// replica back onto the other hdd ("any" never places on the remote tier,
// so vector_satisfied saw it misplaced), undoing the demotion.
func TestLivePlanLeavesDemotedReplicasAlone(t *testing.T) {
	c := &Curator{}
	c.opts.EnsureDefaults()
	const mb = 1 << 20
	devs := []model.Device{
		{ID: "n1/hdd0", Node: "n1", Tier: "hdd", State: model.DeviceUp, CapacityBytes: 24 * mb, UsedBytes: 1800 << 10},
		{ID: "n1/hdd1", Node: "n1", Tier: "hdd", State: model.DeviceUp, CapacityBytes: 24 * mb, UsedBytes: 20400 << 10},
		{ID: "n1/remote0", Node: "n1", Tier: "remote", State: model.DeviceUp, CapacityBytes: 1 << 30, UsedBytes: 16200 << 10},
	}
	snap := model.NewSnapshot(time.Unix(1000, 0), []model.Node{{ID: "n1", Up: true}}, devs)
	rep := func(d string) decide.Replica {
		tier := model.Tier("hdd")
		if strings.Contains(d, "remote") {
			tier = "remote"
		}
		return decide.Replica{Replica: model.Replica{Device: model.DeviceID(d), Node: "n1", Tier: tier}}
	}
	res := &scanResult{bucketOf: map[uint64]string{}, egroups: []decide.Egroup{
		{ID: 1, Size: 2400 << 10, Vector: model.MustParseVector("any=1"), Replicas: []decide.Replica{rep("n1/hdd1")}},
		{ID: 2, Size: 16200 << 10, Vector: model.MustParseVector("any=2"), Replicas: []decide.Replica{rep("n1/hdd1"), rep("n1/remote0")}},
		{ID: 3, Size: 1800 << 10, Vector: model.MustParseVector("any=2"), Replicas: []decide.Replica{rep("n1/hdd1"), rep("n1/hdd0")}},
	}}
	tasks, lp := c.livePlan(snap, res, nil, rand.New(rand.NewPCG(1, 2)))
	if lp != nil && lp.Error != "" {
		t.Fatal(lp.Error)
	}
	moved1 := false
	for _, task := range tasks {
		for _, r := range task.Remove {
			if r.Tier == model.TierRemote || strings.Contains(string(r.Device), "remote") {
				t.Fatalf("the live plan moves a demoted replica back: %v", task)
			}
		}
		moved1 = moved1 || task.Egroup == 1
	}
	if !moved1 {
		t.Fatalf("the hdd tier was not balanced (egroup 1 onto n1/hdd0): %v", tasks)
	}
}
