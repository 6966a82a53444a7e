package rebuild

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/devcluster"
	"github.com/terrace-storage/terrace/internal/experiment/rebuild"
)

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "terrace-rebuild")
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

// A miniature failure experiment: a 3-node cluster with 1 MiB egroups,
// 24 MiB preloaded, a light open-loop load, one device of the last node
// failed by injected EIO. Every egroup must be protected again, no read
// of acknowledged data may fail, and afterwards every acknowledged object
// has its two replicas off the failed device with intact bytes.
func TestRebuildMiniature(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := rebuild.Run(ctx, rebuild.Options{
		Binary: bin, Dir: filepath.Join(out, "work"), Out: out, BasePort: freeBlock(t),
		Nodes: 3, Devices: []string{"ssd:ssd0:256MiB", "ssd:ssd1:256MiB"}, EgroupBytes: 1 << 20,
		Emulate: true, DataBytes: 24 << 20, ObjectBytes: 128 << 10, PreloadWorkers: 4,
		Rate: 20, Baseline: 4 * time.Second, Tail: 2 * time.Second, MaxRebuild: 40 * time.Second,
		Seed: 7, Log: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", rebuild.Summary(res))
	if !res.Protected || res.TimeToProtection <= 0 {
		t.Fatalf("not protected (time to protection %.1fs)", res.TimeToProtection)
	}
	if res.BytesMoved <= 0 || res.RecoverTasks == 0 || res.PeakURBytes <= 0 {
		t.Errorf("%d bytes re-replicated in %d tasks, peak under-replicated %d: nothing was rebuilt",
			res.BytesMoved, res.RecoverTasks, res.PeakURBytes)
	}
	if res.ReadFailures != 0 {
		t.Errorf("%d reads of acknowledged data failed during the load", res.ReadFailures)
	}
	v := res.Verify
	if v.Objects < res.Preloaded || v.UnderProtected != 0 || v.Lost != 0 || v.Corrupt != 0 {
		t.Errorf("verification of %d objects (%d preloaded): %d extents under-protected, %d lost, %d corrupt: %v",
			v.Objects, res.Preloaded, v.UnderProtected, v.Lost, v.Corrupt, v.Examples)
	}
	if len(res.Phases) != 3 || res.Phases[0].Ops == 0 || res.Phases[1].Ops == 0 {
		t.Errorf("phases %+v: want operations before and during the rebuild", res.Phases)
	}
	for _, f := range []string{rebuild.CSVFile, rebuild.PNGFile, rebuild.SummaryFile, rebuild.JSONFile, rebuild.JobsFile} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("output %s: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "work")); !os.IsNotExist(err) {
		t.Errorf("cluster directory left behind: %v", err)
	}
}

// freeBlock finds 30 free ports (3 nodes × 10) below the ephemeral range.
func freeBlock(t *testing.T) int {
	t.Helper()
	base, err := devcluster.FreeBase(25000, 30, 100)
	if err != nil {
		t.Fatal(err)
	}
	return base
}
