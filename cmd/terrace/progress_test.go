package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/curator"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/server"
)

func plainProgress(buf *bytes.Buffer, label string, every time.Duration) *progress {
	return &progress{w: buf, label: label, start: time.Now(), total: -2, every: every}
}

func TestPlainProgressLines(t *testing.T) {
	var buf bytes.Buffer
	p := plainProgress(&buf, "drain n2", time.Hour)
	p.setRate(3<<20, 12<<20, "bytes", "40 egroups left", 1<<20, 9*time.Second)
	p.set(6<<20, 12<<20, "bytes", "30 egroups left") // throttled: within the interval
	p.done()
	want := "drain n2: 3.0 MiB / 12.0 MiB (25%), 1.0 MiB/s, ETA 9s; 40 egroups left\n"
	if !strings.HasPrefix(buf.String(), want) || strings.Count(buf.String(), "\n") != 2 || !strings.Contains(buf.String(), "drain n2: finished after") {
		t.Errorf("plain progress:\n%s\nwant first line %q, then the finish line", buf.String(), want)
	}
	buf.Reset()
	p = plainProgress(&buf, "scan", 0)
	p.setRate(2, 4, "tasks", "full job", 1, 2*time.Second)
	p.setRate(2, 4, "tasks", "full job", 1, 2*time.Second) // the same line is not repeated
	p.setRate(9, 4, "tasks", "full job", 1, 0)             // clamped to the total
	if got := strings.Split(strings.TrimSpace(buf.String()), "\n"); len(got) != 2 || !strings.HasPrefix(got[1], "scan: 4/4 tasks (100%)") {
		t.Errorf("plain progress lines %q", got)
	}
	buf.Reset()
	quiet := &progress{w: &buf, quiet: true}
	quiet.set(1, 2, "tasks", "x")
	quiet.spin("x")
	quiet.done()
	if buf.Len() != 0 {
		t.Errorf("--json progress printed %q", buf.String())
	}
}

// TestCuratorRunProgressOnRealNode: `curator run full --wait`'s progress
// finds the job the request started on a real node and reports its moves.
func TestCuratorRunProgressOnRealNode(t *testing.T) {
	dir := t.TempDir()
	cfg := server.Config{DataDir: dir, ProbeBytes: 64 << 10, EgroupMaxBytes: 1 << 20, DefaultVector: "any=1",
		Devices: []string{"ssd:" + filepath.Join(dir, "ssd0") + ":64MiB", "hdd:" + filepath.Join(dir, "hdd0") + ":1GiB"},
		Curator: server.CuratorConfig{Disabled: true, TierDownAbove: 0.05, HotWindow: time.Millisecond, MoveMBps: 2}} // 8 MiB at 2 MB/s after a 2 MB burst: the moves last ~3 s, several polls
	n, err := server.Open(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx := context.Background()
	if err := n.Layer.CreateBucket(ctx, "prog", n.Config.RootUser, model.Vector{}); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		if _, err := n.Layer.Put(ctx, "prog", fmt.Sprint(i), bytes.NewReader(make([]byte, 1<<20)), object.PutOptions{Size: 1 << 20}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(10 * time.Millisecond) // past the hot window: the data is cold
	s := httptest.NewServer(n.AdminHandler())
	defer s.Close()
	c := (&globalFlags{endpoint: s.URL, accessKey: n.Config.RootUser, secretKey: n.Config.RootPassword}).client()
	var buf bytes.Buffer
	p := plainProgress(&buf, "full scan", 0)
	p.poll = 20 * time.Millisecond
	var rec curator.JobRecord
	err = watchJobs(c, p, "full", func() error {
		return c.callJSON("POST", "/v1/curator/run", url.Values{"kind": {"full"}, "wait": {"1"}}, &rec)
	})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Done["tier-down"] == 0 {
		t.Fatalf("the scan moved nothing (record %+v); the test needs tier-down moves", rec)
	}
	out := buf.String()
	if !regexp.MustCompile(`full scan: [0-9.]+ [KM]iB / [0-9.]+ MiB \(\d+%\).*tasks \(full job\)`).MatchString(out) ||
		!strings.Contains(out, "full scan: finished after") {
		t.Errorf("progress output:\n%s", out)
	}
}
