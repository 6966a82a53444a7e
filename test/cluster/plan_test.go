package cluster

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/actuate"
	"github.com/terrace-storage/terrace/internal/devcluster"
)

// TestPlannedJobSurvivesMasterKill: `terrace plan apply` runs a planned
// job on the Curator master; the master is killed with SIGKILL in the
// middle of it; another node wins the election, resumes the job from its
// checkpoint in the metadata store and finishes it. Moves that do not
// involve the dead node all end done (or stale, never failed); moves made
// before the kill are not redone — one checkpointed done is skipped, one
// done after the last checkpoint turns stale on its compare-and-swap —
// and every object reads back byte-identical.
func TestPlannedJobSurvivesMasterKill(t *testing.T) {
	const (
		seed    = 11
		bucket  = "planned"
		objects = 48
	)
	// Slow moves (2 MB/s) so the kill lands mid-job; small egroups so the
	// job has many tasks; no scheduled scans or recovery to interfere.
	c := startCluster(t, 3, 27700, `curator:
  node_down_after: 1h
  partial_every: 1h
  full_every: 1h
  move_mbps: 2
  tiering: false
  seal_idle: -1s
egroup_max_bytes: 1048576
`)
	createBucket(t, c.Nodes[0].Admin, bucket, "any=2")
	var all []string
	for _, n := range c.Nodes {
		all = append(all, n.Admin)
	}
	acks := newAckSet()
	key := func(i int) string { return fmt.Sprintf("obj-%03d", i) }
	ctx, cancel := ctxT(3 * time.Minute)
	defer cancel()
	if res := runWriters(ctx, 4, objects, 3, all, bucket, seed, key, 200<<10, 400<<10, acks); acks.len() != objects {
		t.Fatalf("fill: %d of %d acknowledged: %v", acks.len(), objects, res.firstErrs)
	}
	for _, n := range c.Nodes { // seal the fill's egroups: open ones are not planned
		if err := call(ctx, "POST", n.Admin, "/v1/curator/run?kind=partial&wait=1", nil, nil); err != nil {
			t.Fatal(err)
		}
	}

	master := c.node(c.curatorLeader())
	var target *devcluster.Node
	for _, n := range c.Nodes {
		if n != master {
			target = n
			break
		}
	}
	// A Lua rule: every replica on the target's ssd costs 1; the
	// hint points the solver at the target's first hdd.
	rule := fmt.Sprintf(`scope = "egroup"
function cost(view)
  local c = 0
  for _, r in ipairs(view.replicas) do
    if r.device == "%[1]s/ssd0" then c = c + 1 end
  end
  return c
end
function hints(view)
  return { { kind = "prefer-device", target = "%[1]s/hdd0" } }
end`, target.ID)
	if err := call(ctx, "PUT", master.Admin, "/v1/policies/empty-ssd?hook=rule&author=test", []byte(rule), nil); err != nil {
		t.Fatalf("put rule: %v", err)
	}
	var applied struct {
		Plan struct {
			Moves      []struct{ From, To string } `json:"moves"`
			Rules      string                      `json:"rules"`
			CostBefore string                      `json:"cost_before"`
			Egroups    int                         `json:"egroups"`
			RuleErrors []string                    `json:"rule_errors"`
		} `json:"plan"`
		Job actuate.Progress `json:"job"`
	}
	deadline := time.Now().Add(30 * time.Second)
	for { // the rule is live cluster-wide within milliseconds; retry until the plan sees it
		if err := call(ctx, "POST", master.Admin, "/v1/plan/apply", nil, &applied); err != nil {
			t.Fatalf("plan apply: %v", err)
		}
		if applied.Job.Tasks > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if applied.Job.Tasks < 4 {
		t.Fatalf("the plan has %d tasks (%d moves): too few to kill the master in the middle (%d egroups, cost %s, rules %q, errors %v)",
			applied.Job.Tasks, len(applied.Plan.Moves), applied.Plan.Egroups, applied.Plan.CostBefore, applied.Plan.Rules, applied.Plan.RuleErrors)
	}
	job := applied.Job.ID
	involvesMaster := map[string]bool{}
	for _, m := range applied.Plan.Moves {
		if strings.HasPrefix(m.From, master.ID+"/") || strings.HasPrefix(m.To, master.ID+"/") {
			involvesMaster[m.From+">"+m.To] = true
		}
	}
	t.Logf("job %s: %d tasks (%d moves, %d touch the master %s); target %s/ssd0", job, applied.Job.Tasks, len(applied.Plan.Moves), len(involvesMaster), master.ID, target.ID)

	// Kill the master once some tasks are done and some are not.
	var before actuate.Progress
	for {
		before = jobProgress(t, master.Admin, job)
		if before.States["done"] > 0 {
			break
		}
		if time.Now().After(deadline.Add(time.Minute)) {
			t.Fatalf("no task done: %+v", before)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if before.States["pending"] == 0 {
		t.Fatalf("the job finished before the kill (%+v): slow the moves down", before.States)
	}
	c.Kill(master)
	t.Logf("killed master %s with %v", master.ID, before.States)

	// Another node becomes master and finishes the job.
	var after actuate.Progress
	var newMaster string
	for deadline := time.Now().Add(3 * time.Minute); ; {
		for _, n := range c.Nodes {
			if n == master {
				continue
			}
			var ps []actuate.Progress
			if err := call(ctx, "GET", n.Admin, "/v1/plan/jobs?n=50", nil, &ps); err != nil {
				continue
			}
			for _, p := range ps {
				if p.ID == job && !p.Finished.IsZero() {
					after, newMaster = p, n.ID
				}
			}
		}
		if newMaster != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job did not finish under a new master")
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("job finished under %s (owner %s): %v, %d bytes moved, errors %v", newMaster, after.Owner, after.States, after.BytesDone, after.Errors)
	if after.Owner == master.ID {
		t.Fatalf("the job's owner is still the dead master %s", master.ID)
	}
	if after.States["done"] < before.States["done"] {
		t.Fatalf("done tasks went from %d to %d: the checkpoint lost progress", before.States["done"], after.States["done"])
	}
	if failed := after.States["failed"]; failed > len(involvesMaster) {
		t.Fatalf("%d tasks failed but only %d involve the dead master: %v", failed, len(involvesMaster), after.Errors)
	}
	if after.States["pending"] != 0 {
		t.Fatalf("finished with pending tasks: %v", after.States)
	}

	// The master comes back; nothing was lost or corrupted.
	rctx, rcancel := ctxT(time.Minute)
	defer rcancel()
	if err := c.Restart(rctx, master); err != nil {
		t.Fatal(err)
	}
	c.waitAllUp(60 * time.Second)
	lost, corrupt, _ := verifyAll(t, acks.list(), all, bucket, func(k string) []byte {
		return content(seed, bucket+"/"+k, 200<<10, 400<<10)
	})
	if len(lost) > 0 || len(corrupt) > 0 {
		t.Fatalf("after the job: %d lost, %d corrupt", len(lost), len(corrupt))
	}
	// The rule's goal was reached for every egroup the job could move.
	var plan struct {
		Moves []struct{ From, To string } `json:"moves"`
	}
	if err := call(ctx, "GET", c.Nodes[0].Admin, "/v1/plan", nil, &plan); err != nil {
		t.Fatal(err)
	}
	left := 0
	for _, m := range plan.Moves {
		if m.From == target.ID+"/ssd0" {
			left++
		}
	}
	if left > len(involvesMaster) {
		t.Fatalf("%d replicas still to move off %s/ssd0 after the job", left, target.ID)
	}
}

func jobProgress(t *testing.T, admin, id string) actuate.Progress {
	t.Helper()
	ctx, cancel := ctxT(10 * time.Second)
	defer cancel()
	var ps []actuate.Progress
	if err := call(ctx, "GET", admin, "/v1/plan/jobs?n=50", nil, &ps); err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.ID == id {
			return p
		}
	}
	t.Fatalf("job %s not listed", id)
	return actuate.Progress{}
}
