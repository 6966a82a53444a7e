package zlog

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/devcluster"
	"github.com/terrace-storage/terrace/internal/zlog/client"
)

var (
	terraceBin string
	keepDir    = flag.Bool("keep", false, "keep cluster data directories (for debugging)")
)

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "terrace-zlog-test-")
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
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// clientLogger logs a client's retries when TERRACE_TEST_CLIENT_DEBUG is
// set (to stderr, with the client's name).
func clientLogger(name string) *slog.Logger {
	if os.Getenv("TERRACE_TEST_CLIENT_DEBUG") == "" {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("client", name)
}

type testCluster struct {
	*devcluster.Cluster
	t   *testing.T
	dir string
}

// startCluster starts n nodes on a free port block near base.
func startCluster(t *testing.T, n, base int) *testCluster {
	t.Helper()
	return startClusterWith(t, n, base, "")
}

// startClusterWith starts n nodes with config (YAML) as every node's
// configuration file when not empty.
func startClusterWith(t *testing.T, n, base int, config string) *testCluster {
	t.Helper()
	dir := t.TempDir()
	if *keepDir {
		dir, _ = os.MkdirTemp("", "terrace-"+strings.ReplaceAll(t.Name(), "/", "_")+"-")
		t.Logf("data under %s", dir)
	}
	chosen, err := devcluster.FreeBase(base, 10*n, 500)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var extra []string
	if config != "" {
		path := filepath.Join(dir, "node.yaml")
		if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
		extra = []string{"--config", path}
	}
	c, err := devcluster.Start(ctx, devcluster.Options{Binary: terraceBin, Dir: dir, Nodes: n, BasePort: chosen,
		Devices: []string{"ssd:ssd0:2GiB", "hdd:hdd0:4GiB"}, ExtraArgs: extra})
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	// A log created before every node has heard of its peers is placed
	// on the nodes its host sees up: under load that was one node, both
	// replicas of every stripe on it (not durable, and TestSequencerKill
	// refuses it).
	if err := c.WaitViews(ctx); err != nil {
		c.Stop()
		t.Fatalf("cluster views: %v", err)
	}
	tc := &testCluster{Cluster: c, t: t, dir: dir}
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() {
			tc.dumpLogs()
		}
	})
	return tc
}

func (c *testCluster) dumpLogs() {
	for _, n := range c.Nodes {
		b, err := os.ReadFile(n.LogPath)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		var keep []string
		for _, l := range lines {
			if strings.Contains(l, "component=log") || strings.Contains(l, "level=ERROR") || strings.Contains(l, "level=WARN") ||
				strings.Contains(l, "panic") || strings.Contains(l, "election") {
				keep = append(keep, l)
			}
		}
		if len(keep) > 120 {
			keep = keep[len(keep)-120:]
		}
		c.t.Logf("---- %s log (shared-log lines) ----\n%s", n.ID, strings.Join(keep, "\n"))
	}
}

// rpcs lists every node's RPC address, starting at node i.
func (c *testCluster) rpcs(i int) []string {
	var out []string
	for k := range c.Nodes {
		out = append(out, c.Nodes[(i+k)%len(c.Nodes)].RPC)
	}
	return out
}

func (c *testCluster) node(id string) *devcluster.Node {
	for _, n := range c.Nodes {
		if n.ID == id {
			return n
		}
	}
	c.t.Fatalf("no node %s", id)
	return nil
}

// newClient returns a log client that starts at node i.
func (c *testCluster) newClient(t *testing.T, i int, name string) *client.Client {
	t.Helper()
	cl, err := client.New(client.Config{Endpoints: c.rpcs(i), NodeID: name, Secret: []byte(c.Secret), RetryTimeout: 30 * time.Second, Logger: clientLogger(name)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
