package cluster

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/terrace-storage/terrace/internal/cluster"
	"github.com/terrace-storage/terrace/internal/curator"
	"github.com/terrace-storage/terrace/internal/devcluster"
	"github.com/terrace-storage/terrace/internal/experiment/scanbench"
	"github.com/terrace-storage/terrace/internal/model"
)

// TestFullScanSurvivesWorkerKilledMidScan kills a worker (-9) while a
// spread, shuffled full scan is running on a real 3-node cluster: the
// worker is mapping partitions, pushing references to reducers or
// reducing them when it dies. The scan must complete and find exactly
// what it found with every node up (docs/design/0000 invariant 9: a
// partition's output is used whole or not at all), with the dead
// worker's partitions re-run by the master and the shuffle abandoned in
// favour of the master's own join.
//
// The metadata is synthetic (the scan benchmark's loader: sealed egroups
// on the nodes' real devices, two extents each, one object per extent),
// large enough that the victim maps several partitions per scan; it is
// killed while mapping one, after finishing another (its own metrics
// say when). The Curator runs nothing on its own, so nothing but the
// scans reads or writes these records.
func TestFullScanSurvivesWorkerKilledMidScan(t *testing.T) {
	const egroups = 60_000
	c := startCluster(t, 3, 28500, `curator:
  partial_every: 24h
  full_every: 24h
  node_down_after: 1h
  scrub: false
  tiering: false
planner:
  live_rules: ["off"]
`)
	ctx, cancel := ctxT(5 * time.Minute)
	defer cancel()

	var devs []model.Replica
	for _, n := range c.Nodes {
		st, err := nodeStatus(ctx, n.Admin)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range st.Devices {
			devs = append(devs, model.Replica{Device: d.ID, Node: model.NodeID(n.ID), Tier: d.Tier})
		}
	}
	etcd, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{fmt.Sprintf("127.0.0.1:%d", c.Opts.Port(0, devcluster.PortEtcdClient))},
		DialTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	start := time.Now()
	lo := scanbench.Options{Egroups: egroups, Full: true, Extents: 2, AccessFraction: 0.5, Seed: 7}
	if err := scanbench.Load(ctx, cluster.NewEtcdKV(etcd), lo, devs, model.MustParseVector("any=2")); err != nil {
		t.Fatalf("load: %v", err)
	}
	t.Logf("loaded %d egroups with 2 extents each in %s", egroups, time.Since(start).Round(time.Millisecond))

	leaderID := c.curatorLeader()
	var leader *devcluster.Node
	for _, n := range c.Nodes {
		if n.ID == leaderID {
			leader = n
		}
	}
	// spreadScan runs full scans until one is spread over the three
	// nodes and shuffled (on a loaded machine a node slow to answer makes
	// a scan fall back; that one proves nothing here).
	spreadScan := func() curator.JobRecord {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			rec, err := curatorRun(ctx, leader.Admin, "full")
			if err != nil {
				t.Fatalf("full scan: %v", err)
			}
			if len(curatorPartitions(rec.Partitions).nodes()) == 3 && rec.Shuffle != "" {
				return rec
			}
			if time.Now().After(deadline) {
				t.Fatalf("no full scan spread over 3 nodes and shuffled: partitions %v, shuffle %q (abandoned: %q)",
					rec.Partitions, rec.Shuffle, rec.ShuffleError)
			}
		}
	}
	spreadScan() // the first scan is cold (caches, connections): time the second
	base := spreadScan()
	t.Logf("every node up: %d records in %s, %+v, shuffle %s", base.Records, base.End.Sub(base.Start).Round(time.Millisecond), base.Stats, base.Shuffle)
	if base.Stats.Egroups < egroups || len(base.Errors) > 0 {
		t.Fatalf("baseline scan: %+v", base)
	}

	// hit reports whether the victim died with work of this scan: a
	// partition it was assigned re-run elsewhere, or the shuffle
	// abandoned (nothing else in this test makes one fail).
	hit := func(rec curator.JobRecord, victim string) bool {
		for _, who := range rec.Partitions {
			if strings.Contains(who, victim+" failed") {
				return true
			}
		}
		return rec.Shuffle == "" && rec.ShuffleError != ""
	}
	var victim *devcluster.Node
	for _, n := range c.Nodes {
		if n.ID != leaderID {
			victim = n
			break
		}
	}
	type result struct {
		rec curator.JobRecord
		err error
	}
	done := make(chan result, 1)
	go func() {
		rec, err := curatorRun(ctx, leader.Admin, "full")
		done <- result{rec, err}
	}()
	// Kill the victim while it maps a partition of this scan, once it has
	// finished one (so references it mapped are already on the
	// reducers): its own metrics say when.
	finishedBefore := metricValue(t, victim.Admin, "terrace_curator_map_partitions_total", `outcome="ok"`)
	var r result
	killed := false
	for !killed {
		select {
		case r = <-done:
			t.Fatalf("the scan ended before %s had mapped a partition and started the next: %+v (err %v)", victim.ID, r.rec.Partitions, r.err)
		default:
		}
		active := metricValue(t, victim.Admin, "terrace_curator_map_partitions_active", "")
		finished := metricValue(t, victim.Admin, "terrace_curator_map_partitions_total", `outcome="ok"`)
		if active > 0 && finished > finishedBefore {
			c.Kill(victim)
			killed = true
			t.Logf("%s killed while mapping (%v partitions in progress, %v finished in this scan)", victim.ID, active, finished-finishedBefore)
		}
		time.Sleep(2 * time.Millisecond)
	}
	r = <-done
	if r.err != nil {
		t.Fatalf("full scan with %s killed: %v", victim.ID, r.err)
	}
	rec := r.rec
	t.Logf("scan with %s killed: %d records in %s, partitions %v, shuffle %q, abandoned: %q",
		victim.ID, rec.Records, rec.End.Sub(rec.Start).Round(time.Millisecond), rec.Partitions, rec.Shuffle, rec.ShuffleError)
	if len(rec.Errors) > 0 {
		t.Fatalf("scan with %s killed: errors %v", victim.ID, rec.Errors)
	}
	if !hit(rec, victim.ID) {
		t.Fatalf("%s was killed mid-scan, but the job record shows neither a partition re-run nor the shuffle abandoned", victim.ID)
	}
	for part, who := range rec.Partitions {
		if who == victim.ID {
			t.Fatalf("partition %s credited to %s, which died before the scan ended", part, victim.ID)
		}
	}
	if rec.Records != base.Records || rec.Stats != base.Stats || fmt.Sprint(rec.Dangling) != fmt.Sprint(base.Dangling) {
		t.Fatalf("scan with %s killed mid-scan differs from the scan with every node up:\n killed: records %d stats %+v dangling %v\n all up: records %d stats %+v dangling %v",
			victim.ID, rec.Records, rec.Stats, rec.Dangling, base.Records, base.Stats, base.Dangling)
	}
}

// metricValue reads one sample of a metric from a node's /metrics (0 if
// absent); labels, if set, must appear in the sample's label set.
func metricValue(t *testing.T, admin, name, labels string) float64 {
	t.Helper()
	ctx, cancel := ctxT(10 * time.Second)
	defer cancel()
	req, _ := httpRequest(ctx, "GET", "http://"+admin+"/metrics", nil)
	resp, err := httpc.Do(req)
	if err != nil {
		t.Fatalf("%s metrics: %v", admin, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s metrics: %v", admin, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		if labels != "" && !strings.Contains(line, labels) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("%s metrics: %q: %v", admin, line, err)
		}
		return v
	}
	return 0
}
