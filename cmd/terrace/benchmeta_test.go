package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/bench"
	"github.com/terrace-storage/terrace/internal/server"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestBenchReportsMetadataWorkPerOp: `bench s3` with metrics= reads a real
// node's terrace_meta_* counters around the timed phase, so a PUT's
// metadata cost (one commit; the bucket record from the cache) is a
// number a regression moves.
func TestBenchReportsMetadataWorkPerOp(t *testing.T) {
	dir := t.TempDir()
	cfg := server.Config{DataDir: dir, ProbeBytes: 64 << 10, DefaultVector: "any=1",
		S3Address: freeAddr(t), AdminAddress: freeAddr(t),
		Devices: []string{"ssd:" + filepath.Join(dir, "ssd0") + ":1GiB"},
		Curator: server.CuratorConfig{Disabled: true}}
	n, err := server.Open(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- n.Serve(ctx, s3Starter) }()
	defer func() {
		cancel()
		if err := <-served; err != nil && !errors.Is(err, context.Canceled) {
			t.Error(err)
		}
	}()
	s3URL := "http://" + cfg.S3Address
	for deadline := time.Now().Add(10 * time.Second); ; {
		resp, err := http.Get(s3URL)
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("S3 gateway did not start: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ep, err := bench.ParseEndpoint("t="+s3URL+",metrics=http://"+cfg.AdminAddress,
		bench.Endpoint{Access: n.Config.RootUser, Secret: n.Config.RootPassword})
	if err != nil {
		t.Fatal(err)
	}
	res, err := bench.Run(ctx, ep, bench.Options{Workload: bench.Mix{bench.OpPut: 1},
		Sizes: bench.MustParseSizeDist("4KiB"), Concurrency: 4, Count: 200, Bucket: "meta-cost"})
	if err != nil {
		t.Fatal(err)
	}
	m := res.Meta
	if m == nil {
		t.Fatalf("no metadata counters in the result; notes %v", res.Notes)
	}
	// One commit per PUT (object, extent and egroup records together);
	// a second commit per PUT would be a regression.
	if m.CommitsPerOp < 0.9 || m.CommitsPerOp > 1.2 || m.TxnsPerOp != m.CommitsPerOp {
		t.Errorf("commits/op %.2f, store txns/op %.2f: want ≈1 each on Pebble", m.CommitsPerOp, m.TxnsPerOp)
	}
	// The bucket record comes from the cache; what is left are the key's
	// own lookups (at most a few), not a read of every map.
	if m.ReadsPerOp > 4 {
		t.Errorf("reads/op %.2f: a PUT reads more metadata than it should", m.ReadsPerOp)
	}
	t.Logf("per PUT: %.2f reads, %.2f commits, %.2f txns", m.ReadsPerOp, m.CommitsPerOp, m.TxnsPerOp)

	res, err = bench.Run(ctx, ep, bench.Options{Workload: bench.Mix{bench.OpGet: 1},
		Sizes: bench.MustParseSizeDist("4KiB"), Concurrency: 4, Count: 200, Objects: 20, Bucket: "meta-cost"})
	if err != nil {
		t.Fatal(err)
	}
	// One read of the object record; the S3 front end hands the record it
	// looked up to the read instead of looking the key up again. (Egroup
	// locations come from the location cache after the first read.)
	if m := res.Meta; m == nil || m.CommitsPerOp != 0 || m.ReadsPerOp > 1.5 {
		t.Errorf("per GET: %+v; want no commits and one record read", res.Meta)
	} else {
		t.Logf("per GET: %.2f reads", m.ReadsPerOp)
	}

	bad, _ := bench.ParseEndpoint("t="+s3URL+",metrics="+s3URL, bench.Endpoint{Access: n.Config.RootUser, Secret: n.Config.RootPassword})
	res, err = bench.Run(ctx, bad, bench.Options{Workload: bench.Mix{bench.OpPut: 1},
		Sizes: bench.MustParseSizeDist("4KiB"), Concurrency: 1, Count: 5, Bucket: "meta-cost"})
	if err != nil || res.Meta != nil || len(res.Notes) == 0 {
		t.Errorf("metrics from a non-admin URL: err %v, meta %+v, notes %v; want a note and no numbers", err, res.Meta, res.Notes)
	}
}
