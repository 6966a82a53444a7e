package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/actuate"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/server"
)

// TestCuratorQueueCommand: `terrace curator queue` lists the node queues
// of a real node; bad arguments get a clear error.
func TestCuratorQueueCommand(t *testing.T) {
	dir := t.TempDir()
	cfg := server.Config{DataDir: dir, ProbeBytes: 64 << 10, DefaultVector: "any=1",
		Devices: []string{"ssd:" + filepath.Join(dir, "ssd0") + ":64MiB"}, Curator: server.CuratorConfig{Disabled: true}}
	n, err := server.Open(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	dst := model.Replica{Device: "n2/ssd0", Node: "n2", Tier: "ssd"}
	src := model.Replica{Device: "n1/hdd0", Node: "n1", Tier: "hdd"}
	var tasks []actuate.Task
	for i := range 3 {
		tasks = append(tasks, actuate.Task{Kind: actuate.KindTierUp, Egroup: uint64(100 + i), ModRev: 7, Bytes: 1 << 20,
			Add: []model.Replica{dst}, Remove: []model.Replica{src}})
	}
	if q, err := n.Curator.Queues().Enqueue(context.Background(), "job-a", time.Now(), tasks); err != nil || q != 3 {
		t.Fatalf("enqueue: %d, %v", q, err)
	}
	s := httptest.NewServer(n.AdminHandler())
	defer s.Close()
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		root := newRootCmd()
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append([]string{"--endpoint", s.URL, "--access-key", n.Config.RootUser, "--secret-key", n.Config.RootPassword}, args...))
		err := root.Execute()
		return out.String(), err
	}
	out, err := run("curator", "queue")
	if err != nil || !strings.Contains(out, "n2") || !strings.Contains(out, "3") {
		t.Fatalf("curator queue: %v\n%s", err, out)
	}
	out, err = run("curator", "queue", "n2", "-n", "2")
	if err != nil || strings.Count(out, "tier-up") != 2 || !strings.Contains(out, "job-a") {
		t.Fatalf("curator queue n2 -n 2: %v\n%s", err, out)
	}
	out, err = run("--json", "curator", "queue", "n2")
	if err != nil || !strings.Contains(out, `"counts"`) || strings.Count(out, `"job": "job-a"`) != 3 {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	for _, bad := range [][]string{{"curator", "queue", "n2", "-n", "0"}, {"curator", "queue", "a/b"}, {"curator", "queue", "a", "b"}} {
		if out, err := run(bad...); err == nil {
			t.Errorf("%v accepted:\n%s", bad, out)
		}
	}
}
