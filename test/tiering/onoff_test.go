package tiering

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/devcluster"
	"github.com/terrace-storage/terrace/internal/experiment/onoff"
)

// A miniature Curator ON/OFF experiment (Curator §3.4.2) end to end: both
// modes run on real 3-node clusters, every output is written, and with the
// Curator on the destroyed workload's space comes back while with it off
// it does not. Latency is measured, not asserted (see docs/perf.md).
func TestCuratorOnOffMiniature(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two 3-node clusters")
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := onoff.Run(ctx, onoff.Options{
		Binary: bin, Dir: filepath.Join(out, "work"), Out: out,
		BasePort: freeBlock(t),
		SSDBytes: 8 << 20, HDDBytes: 256 << 20,
		Exec: 4 * time.Second, Warmup: time.Second, Rate: 30, Concurrency: 8,
		Emulate: true,
		Log:     t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Modes) != 2 {
		t.Fatalf("%d modes", len(res.Modes))
	}
	on, off := res.Modes[0], res.Modes[1]
	if on.Mode != "on" || off.Mode != "off" {
		t.Fatalf("modes %s, %s", on.Mode, off.Mode)
	}
	for _, m := range res.Modes {
		if m.ExecOps == 0 || m.ExecErrors != 0 {
			t.Errorf("%s: %d operations, %d errors", m.Mode, m.ExecOps, m.ExecErrors)
		}
		if m.UsedBeforeDest <= 0 {
			t.Errorf("%s: used before destroy %d", m.Mode, m.UsedBeforeDest)
		}
	}
	// Data removal: ON gives back most of the destroyed data, OFF keeps it.
	if on.UsedAfterDest*4 > on.UsedBeforeDest {
		t.Errorf("curator on: %d bytes left of %d after destroy", on.UsedAfterDest, on.UsedBeforeDest)
	}
	if off.UsedAfterDest*10 < off.UsedBeforeDest*9 {
		t.Errorf("curator off reclaimed space it has no task for: %d of %d left", off.UsedAfterDest, off.UsedBeforeDest)
	}
	for _, f := range []string{"curator_onoff.csv", "curator_onoff_ssd.png", "curator_onoff_latency.png", "summary.md"} {
		if fi, err := os.Stat(filepath.Join(out, f)); err != nil || fi.Size() == 0 {
			t.Errorf("output %s missing or empty: %v", f, err)
		}
	}
	sum, _ := os.ReadFile(filepath.Join(out, "summary.md"))
	if !strings.Contains(string(sum), "Mean latency OFF/ON") {
		t.Errorf("summary has no latency ratio:\n%s", sum)
	}
}

// freeBlock finds a block of 200 ports (two clusters, one per mode, of
// base+100·mode+10·node+0..4) that nothing listens on, below the kernel's
// ephemeral range (32768+) so outgoing connections cannot take them.
func freeBlock(t *testing.T) int {
	t.Helper()
	base, err := devcluster.FreeBase(24000, 200, 500)
	if err != nil {
		t.Fatal(err)
	}
	return base
}
