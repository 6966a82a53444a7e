package cluster

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/object"
)

// jsonLog is compressible content derived from seed and key.
func jsonLog(seed uint64, key string, size int) []byte {
	r := rand.New(rand.NewPCG(keySeed(seed, key), 11))
	var b bytes.Buffer
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, `{"ts":%d,"key":%q,"path":"/api/items/%d","status":%d,"ms":%d}`+"\n", 1700000000+i, key, r.IntN(50000), 200+100*r.IntN(3), r.IntN(500))
	}
	return b.Bytes()[:size]
}

// TestClusterCompressesColdData: on a 3-node cluster, a cold any=3 bucket
// set to zstd ends with its data stored compressed on three nodes, every
// node reads it back byte-identical, the tier report shows the savings,
// and killing the Curator master with SIGKILL in the middle of the
// compression job loses nothing: a new master takes over, the
// interrupted job's transforms are dropped as stale and re-planned, and
// reads still succeed from every node, also with one node down.
func TestClusterCompressesColdData(t *testing.T) {
	const seed = 20
	c := startCluster(t, 3, 27800, `egroup_max_bytes: 1048576
curator:
  partial_every: 1h
  full_every: 1h
  garbage_grace: 1ms
  seal_idle: 1ms
  move_mbps: 4
  scrub: false
  transform:
    cold_after: 1ms
    hot_reads: 1000000
    hot_window: 1ms
    pack_bytes: 1048576
`)
	admin := c.Nodes[0].Admin
	createBucket(t, admin, "coldlogs", "any=3")
	ctx, cancel := ctxT(5 * time.Minute)
	defer cancel()
	if err := call(ctx, "POST", admin, "/v1/buckets/coldlogs/transform?compress=zstd&cold_after=1ms", nil, nil); err != nil {
		t.Fatal(err)
	}
	// Written through the Curator master: the open egroups of other
	// nodes' writers are sealed only after a minute idle, and the Curator
	// never transforms an egroup a live writer holds open.
	master := c.curatorLeader()
	mnode := c.node(master)
	want := map[string][]byte{}
	for i := 0; i < 40; i++ {
		k := fmt.Sprintf("app/%03d.log", i)
		want[k] = jsonLog(seed, k, 30_000+i*9_000)
		if err := putObject(ctx, mnode.Admin, "coldlogs", k, want[k]); err != nil {
			t.Fatal(err)
		}
	}
	verify := func(when string, admins ...string) {
		t.Helper()
		for k, b := range want {
			for _, a := range admins {
				got, err := getObject(ctx, a, "coldlogs", k)
				if err != nil || !bytes.Equal(got, b) {
					t.Fatalf("%s: GET %s from %s: %d bytes, err %v (want %d)", when, k, a, len(got), err, len(b))
				}
			}
		}
	}
	report := func() object.TierReport {
		var rep object.TierReport
		if err := call(ctx, "GET", admin, "/v1/tier/report", nil, &rep); err != nil {
			t.Fatal(err)
		}
		return rep
	}
	physical := func(rep object.TierReport) (phys, logical int64) {
		for _, tu := range rep.Tiers {
			phys += tu.EgroupBytes
			logical += tu.LogicalBytes
		}
		return
	}
	p0, _ := physical(report())

	// Kill the Curator master while its compression job runs.
	done := make(chan error, 1)
	go func() {
		_, err := curatorRun(ctx, mnode.Admin, "full")
		done <- err
	}()
	time.Sleep(1500 * time.Millisecond)
	c.Kill(mnode)
	<-done
	t.Logf("killed Curator master %s during its full job", master)
	var others []string
	for _, n := range c.Nodes {
		if n.ID != master {
			others = append(others, n.Admin)
		}
	}
	verify("master down", others...)
	if err := c.Restart(ctx, mnode); err != nil {
		t.Fatal(err)
	}
	c.waitAllUp(60 * time.Second)
	var all []string
	for _, n := range c.Nodes {
		all = append(all, n.Admin)
	}
	verify("after restart", all...)
	// Let the (possibly new) master finish the transforms.
	for i := 0; i < 3; i++ {
		m := c.node(c.curatorLeader())
		rec, err := curatorRun(ctx, m.Admin, "full")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("job on %s: done %v stale %d failed %d transformed %v errors %v", m.ID, rec.Done, rec.Stale, rec.Failed, rec.Transformed, rec.Errors)
		if len(rec.Dangling) > 0 {
			t.Fatalf("dangling references: %v", rec.Dangling)
		}
	}
	verify("compressed", all...)
	for k := range want {
		loc, err := locate(ctx, admin, "coldlogs", k)
		if err != nil {
			t.Fatal(err)
		}
		nodes := map[string]bool{}
		for _, x := range loc.Extents {
			if !strings.HasPrefix(x.Transform, "zstd") {
				t.Errorf("%s: extent in egroup %x transform %q, want zstd", k, x.Egroup, x.Transform)
			}
			for _, r := range x.Replicas {
				nodes[string(r.Node)] = true
			}
		}
		if len(nodes) != 3 {
			t.Errorf("%s: replicas on nodes %v, want 3", k, nodes)
		}
	}
	p1, l1 := physical(report())
	t.Logf("physical bytes over all replicas: %d before, %d after (logical %d)", p0, p1, l1)
	if p1*3 > p0 {
		t.Errorf("physical bytes %d → %d: want at least 3x smaller", p0, p1)
	}
	// Compressed data stays readable with a node down.
	c.Kill(c.Nodes[2])
	verify("node 3 down", c.Nodes[0].Admin, c.Nodes[1].Admin)
}

// TestClusterErasureCodesColdData: on 3 nodes with 3 devices each, a cold
// any=3 bucket set to ec=4+2 ends with its data in 4+2 stripes (1.5x
// instead of 3x); killing a node (two strips of every stripe) keeps every
// object readable from the others, and after node_down_after the Curator
// rebuilds the lost strips on the surviving nodes' spare devices.
func TestClusterErasureCodesColdData(t *testing.T) {
	const seed = 21
	c := startCluster(t, 3, 28300, `egroup_max_bytes: 1048576
curator:
  partial_every: 2s
  full_every: 1h
  node_down_after: 3s
  garbage_grace: 1ms
  seal_idle: 1ms
  move_mbps: 1000
  scrub: false
  transform:
    cold_after: 1ms
    hot_reads: 1000000
    hot_window: 1ms
`)
	master := c.curatorLeader()
	mnode := c.node(master)
	createBucket(t, mnode.Admin, "archive", "any=3")
	ctx, cancel := ctxT(5 * time.Minute)
	defer cancel()
	if err := call(ctx, "POST", mnode.Admin, "/v1/buckets/archive/transform?ec=4%2B2&cold_after=1ms", nil, nil); err != nil {
		t.Fatal(err)
	}
	err := call(ctx, "POST", mnode.Admin, "/v1/buckets/archive/transform?ec=6%2B4", nil, nil)
	if err == nil {
		t.Fatal("6+4 accepted")
	}
	t.Logf("6+4: %v", err)
	want := map[string][]byte{}
	var logical int64
	for i := 0; i < 30; i++ {
		k := fmt.Sprintf("blob/%03d", i)
		want[k] = content(seed, "archive/"+k, 20_000, 400_000)
		logical += int64(len(want[k]))
		if err := putObject(ctx, mnode.Admin, "archive", k, want[k]); err != nil {
			t.Fatal(err)
		}
	}
	verify := func(when string, admins ...string) {
		t.Helper()
		for k, b := range want {
			for _, a := range admins {
				got, err := getObject(ctx, a, "archive", k)
				if err != nil || !bytes.Equal(got, b) {
					t.Fatalf("%s: GET %s from %s: %d bytes, err %v (want %d)", when, k, a, len(got), err, len(b))
				}
			}
		}
	}
	for i := 0; i < 3; i++ { // encode, then remove the emptied replicated egroups
		rec, err := curatorRun(ctx, mnode.Admin, "full")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("job %d: done %v errors %v", i, rec.Done, rec.Errors)
	}
	var rep object.TierReport
	if err := call(ctx, "GET", mnode.Admin, "/v1/tier/report", nil, &rep); err != nil {
		t.Fatal(err)
	}
	var phys int64
	for _, tu := range rep.Tiers {
		phys += tu.EgroupBytes
	}
	t.Logf("logical %d, physical %d (%.2fx)", logical, phys, float64(phys)/float64(logical))
	if r := float64(phys) / float64(logical); r < 1.4 || r > 1.7 {
		t.Errorf("4+2 holds %.2fx the data, want about 1.5x", r)
	}
	// Every stripe spreads over the three nodes, two strips each.
	for k := range want {
		loc, err := locate(ctx, mnode.Admin, "archive", k)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range loc.Extents {
			perNode := map[string]int{}
			for _, r := range x.Replicas {
				perNode[string(r.Node)]++
			}
			if x.Transform != "ec 4+2" || len(x.Replicas) != 6 || len(perNode) != 3 {
				t.Fatalf("%s: transform %q, strips by node %v", k, x.Transform, perNode)
			}
		}
	}
	var victim = c.Nodes[0]
	if victim.ID == master {
		victim = c.Nodes[1]
	}
	var others []string
	for _, n := range c.Nodes {
		if n.ID != victim.ID {
			others = append(others, n.Admin)
		}
	}
	c.Kill(victim)
	t.Logf("killed %s (two strips of every stripe)", victim.ID)
	verify("node down", others...)
	// Recovery rebuilds the lost strips on the surviving nodes.
	deadline := time.Now().Add(90 * time.Second)
	for {
		onVictim := 0
		for k := range want {
			loc, err := locate(ctx, mnode.Admin, "archive", k)
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range loc.Extents {
				for _, r := range x.Replicas {
					if string(r.Node) == victim.ID {
						onVictim++
					}
				}
			}
		}
		if onVictim == 0 {
			break
		}
		if time.Now().After(deadline) {
			h, _ := curatorHistory(ctx, mnode.Admin, 3)
			t.Fatalf("%d strips still on %s after 90s; history %+v", onVictim, victim.ID, h)
		}
		time.Sleep(time.Second)
	}
	h, _ := curatorHistory(ctx, mnode.Admin, 10)
	rebuilt := 0
	for _, r := range h {
		rebuilt += r.Done["rebuild-strips"]
	}
	t.Logf("strips rebuilt on the surviving nodes (%d rebuild tasks)", rebuilt)
	verify("rebuilt", others...)
}
