package scaleout

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/devcluster"
	"github.com/terrace-storage/terrace/internal/experiment/scaleout"
)

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "terrace-scaleout")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "terrace")
	out, err := exec.Command("go", "build", "-o", bin, "../../cmd/terrace").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// A miniature scale-out: three nodes with one emulated 256 MiB hdd each
// and 512 KiB egroups, 24 MiB preloaded at any=2, four closed-loop
// clients; a fourth node joins, serves clients, and the planner with
// disk_balanced mean=0 is applied on the live cluster. The planner must move
// replicas onto the new node (its used bytes grow, preloaded objects gain
// a replica there, no task fails), and afterwards every acknowledged
// object reads back byte-identical with each extent on exactly two
// distinct nodes.
func TestScaleoutMiniature(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 4-node cluster")
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := scaleout.Run(ctx, scaleout.Options{
		Binary: bin, Dir: filepath.Join(out, "work"), Out: out, BasePort: freeBlock(t),
		Nodes: 3, Devices: []string{"hdd:hdd0:256MiB"}, EgroupBytes: 512 << 10, Emulate: true,
		DataBytes: 24 << 20, ObjectBytes: 128 << 10, PreloadWorkers: 4, Clients: 4, ReadFraction: 0.8,
		NewNodeServesClients: true, Warmup: time.Second, Baseline: 4 * time.Second, Joined: 3 * time.Second,
		Tail: 3 * time.Second, MaxBalance: time.Minute, MaxRounds: 2, Seed: 5, Log: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", scaleout.Summary(res))
	newNode := res.NewNode
	if !res.Balanced || res.TasksDone == 0 || res.BytesMoved <= 0 || res.TasksFailed != 0 {
		t.Errorf("balanced %v: %d of %d tasks done, %d failed, %d bytes moved", res.Balanced, res.TasksDone, res.Tasks, res.TasksFailed, res.BytesMoved)
	}
	if _, before := res.NodeBytesBefore[newNode]; before {
		t.Errorf("%s was in the cluster before it joined: %v", newNode, res.NodeBytesBefore)
	}
	var oldMax int64
	for n, b := range res.NodeBytesAfter {
		if n != newNode {
			oldMax = max(oldMax, b)
		}
	}
	// disk_balanced mean=0 spread=0.01 on equal devices: when the plan ends the
	// new node is within 1 % of capacity (2.6 MiB) of the others; new
	// writes land during the tail, so allow 6 MiB.
	if got := res.NodeBytesAfter[newNode]; got <= 0 || got < oldMax-(6<<20) {
		t.Errorf("%s holds %d bytes at the end, the fullest old node %d: %v", newNode, got, oldMax, res.NodeBytesAfter)
	}
	v := res.Verify
	if v.Objects < res.Preloaded || v.Lost != 0 || v.Corrupt != 0 || v.OffVector != 0 {
		t.Errorf("verification of %d objects (%d preloaded): %d lost, %d corrupt, %d extents off the vector: %v",
			v.Objects, res.Preloaded, v.Lost, v.Corrupt, v.OffVector, v.Examples)
	}
	if v.PreloadedOnNew == 0 {
		t.Errorf("no preloaded object has a replica on %s: nothing was moved there", newNode)
	}
	for _, name := range []string{scaleout.PhaseBaseline, scaleout.PhaseJoined, scaleout.PhaseMoving, scaleout.PhaseAfter} {
		if p := scaleout.Phase(res.Phases, name); p.Ops == 0 {
			t.Errorf("phase %s has no operations: %+v", name, p)
		}
	}
	for _, f := range []string{scaleout.CSVFile, scaleout.PNGFile, scaleout.SummaryFile, scaleout.JSONFile} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("output %s: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "work")); !os.IsNotExist(err) {
		t.Errorf("cluster directory left behind: %v", err)
	}
}

// freeBlock finds 40 free ports (4 nodes × 10) below the ephemeral range.
func freeBlock(t *testing.T) int {
	t.Helper()
	base, err := devcluster.FreeBase(21000, 40, 100)
	if err != nil {
		t.Fatal(err)
	}
	return base
}
