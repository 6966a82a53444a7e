package chaos

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var (
	seed   = flag.Uint64("seed", 20261123, "schedule seed of the short run (a fixed default keeps `make test` reproducible)")
	events = flag.Int("events", 60, "faults to inject")
)

var terraceBin string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Fprintln(os.Stderr, "test/chaos: skipped in -short mode")
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "terrace-chaos-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	terraceBin = filepath.Join(dir, "terrace")
	cmd := exec.Command("go", "build", "-o", terraceBin, "github.com/terrace-storage/terrace/cmd/terrace")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building terrace:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	noTestCache()
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// noTestCache opens every source directory of the binary, so that `go
// test` reruns this test (instead of replaying a cached PASS) whenever a
// file the binary is built from changes.
func noTestCache() {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}",
		"github.com/terrace-storage/terrace/cmd/terrace").Output()
	if err != nil {
		return
	}
	for _, d := range strings.Fields(string(out)) {
		if f, err := os.Open(d); err == nil {
			f.Close()
		}
	}
}

// TestChaosShort: `terrace chaos --nodes 5 --events 60` passes — no
// acknowledged write lost, no corrupt read, no anomaly — after crashes
// (including the etcd leader and the Curator master), pauses,
// partitions, link and disk faults and bit rot.
func TestChaosShort(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	args := []string{"chaos", "--nodes", "5", "--events", fmt.Sprint(*events), "--seed", fmt.Sprint(*seed), "--dir", dir}
	// Stop the run (it stops its nodes) well before the test's own
	// deadline would kill this process and orphan them.
	ctx, cancel := context.WithTimeout(context.Background(), runLimit(t))
	defer cancel()
	cmd := exec.CommandContext(ctx, terraceBin, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = time.Minute
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start).Round(time.Second)
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	last := lines[len(lines)-1]
	t.Logf("terrace %s: %s in %s", strings.Join(args, " "), last, took)
	if err != nil || !strings.HasPrefix(last, "ok: ") {
		keep, kerr := os.MkdirTemp("", "terrace-chaos-failed-")
		if kerr == nil {
			// Copy, not rename: a rename onto the new directory can fail
			// (and did, silently, losing the logs a failure needs).
			if out, err := exec.Command("cp", "-a", dir+"/.", keep).CombinedOutput(); err != nil {
				t.Logf("keeping the run: %v: %s", err, out)
			}
		}
		t.Fatalf("chaos run failed (%v); run kept in %s\n--- progress ---\n%s\n--- summary ---\n%s", err, keep, tailLines(stderr.String(), 60), stdout.String())
	}
	if !strings.Contains(stdout.String(), " 0 lost, 0 corrupt, 0 anomalies") {
		t.Fatalf("summary line %q", last)
	}
}

// runLimit leaves a few minutes of the test's deadline for the run to
// stop its cluster.
func runLimit(t *testing.T) time.Duration {
	d := 30 * time.Minute
	if dl, ok := t.Deadline(); ok {
		d = time.Until(dl) - 3*time.Minute
	}
	return max(d, time.Minute)
}

func tailLines(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}
