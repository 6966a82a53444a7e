package e2e

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// transformText is compressible content (JSON log lines) derived from the
// seed and key, so a reader can verify an object knowing only its name.
func transformText(seed uint64, key string, size int) []byte {
	r := rand.New(rand.NewPCG(seed, uint64(len(key))*7919+uint64(key[len(key)-1])))
	var b bytes.Buffer
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, `{"ts":%d,"key":%q,"level":"%s","path":"/api/v1/items/%d","status":%d,"ms":%d}`+"\n",
			1700000000+i, key, []string{"info", "warn", "debug"}[r.IntN(3)], r.IntN(100000), 200+100*r.IntN(4), r.IntN(900))
	}
	return b.Bytes()[:size]
}

// TestCrashKill9DuringTransforms kills the server with SIGKILL at random
// moments while the Curator compresses and truncates cold data, restarts
// it, and checks after every round that no acknowledged byte was lost,
// that recovery found no damaged replica and that the consistency check
// finds no dangling reference. Finally it lets the transforms finish and
// checks the data is stored compressed and reads back byte-identical.
func TestCrashKill9DuringTransforms(t *testing.T) {
	if testing.Short() {
		t.Skip("kill -9 suite")
	}
	dir := t.TempDir()
	spec := serverSpec{
		dataDir: filepath.Join(dir, "data"),
		devices: []string{"ssd:" + filepath.Join(dir, "ssd0") + ":8GiB", "hdd:" + filepath.Join(dir, "hdd0") + ":8GiB", "hdd:" + filepath.Join(dir, "hdd1") + ":8GiB"},
		vector:  "ssd=1,hdd=1",
		// Slow background moves (6 MB/s) and small packs (1 MiB) so that
		// a job is many compressions and a kill lands inside one at any
		// step; everything is cold at once.
		config: `egroup_max_bytes: 1048576
curator:
  full_every: 1h
  partial_every: 1h
  garbage_grace: 1ms
  seal_idle: 1ms
  move_mbps: 6
  # A job stops starting tasks after 20 s, so one full job (tasks, then
  # scrub) stays well inside the test client's 60 s timeout even on a
  # loaded machine; the final jobs pick up what is left.
  job_time_limit: 20s
  transform:
    cold_after: 1ms
    truncate_min_bytes: 1
    hot_reads: 1000000
    hot_window: 1ms
    pack_bytes: 1048576
`,
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	srv := startServer(t, spec)
	c := srv.client()
	if err := c.createBucket("cold", "hdd=2"); err != nil {
		t.Fatal(err)
	}
	if err := c.json("POST", "/v1/buckets/cold/transform", url.Values{"compress": {"zstd"}, "cold_after": {"1ms"}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	// Incompressible data in a bucket (and so egroups) of its own.
	if err := c.createBucket("media", "any=2"); err != nil {
		t.Fatal(err)
	}
	if err := c.json("POST", "/v1/buckets/media/transform", url.Values{"compress": {"zstd"}, "cold_after": {"1ms"}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.json("POST", "/v1/buckets/cold/transform", url.Values{"compress": {"lz4"}}, nil, nil); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("unknown codec: %v, want HTTP 400", err)
	}
	want := map[string][]byte{}
	r := rand.New(rand.NewPCG(seed, 1))
	for i := 0; i < 60; i++ {
		k := fmt.Sprintf("logs/%03d.json", i)
		want[k] = transformText(seed, k, 20_000+r.IntN(600_000))
	}
	for i := 0; i < 8; i++ {
		k := fmt.Sprintf("media/%02d.bin", i)
		want[k] = content(seed, k, 0, 50_000, 400_000)
	}
	// Duplicates in a dedup bucket: six copies of two objects.
	if err := c.createBucket("images", "hdd=2"); err != nil {
		t.Fatal(err)
	}
	if err := c.json("POST", "/v1/buckets/images/transform", url.Values{"dedup": {"on"}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 12; i++ {
		want[fmt.Sprintf("images/%02d.img", i)] = content(seed, "image", i%2, 300_000, 900_000)
	}
	bucketOf := func(k string) string {
		switch {
		case strings.HasPrefix(k, "media/"):
			return "media"
		case strings.HasPrefix(k, "images/"):
			return "images"
		}
		return "cold"
	}
	for k, b := range want {
		if err := c.put(bucketOf(k), k, b); err != nil {
			t.Fatal(err)
		}
	}
	// Deleted objects leave dead extents and dead egroup tails.
	n := 0
	for k := range want {
		if strings.HasPrefix(k, "logs/") && n < 10 {
			if err := c.del("cold", k); err != nil {
				t.Fatal(err)
			}
			delete(want, k)
			n++
		}
	}
	verify := func(round string) {
		t.Helper()
		for k, b := range want {
			got, err := c.get(bucketOf(k), k)
			if err != nil || !bytes.Equal(got, b) {
				t.Fatalf("%s: %s: %d bytes, err %v; want %d bytes\nlog:\n%s", round, k, len(got), err, len(b), tail(srv.log(), 3000))
			}
		}
	}
	runFull := func() (map[string]any, error) {
		var rec map[string]any
		err := c.json("POST", "/v1/curator/run", url.Values{"kind": {"full"}, "wait": {"1"}}, nil, &rec)
		return rec, err
	}
	for round := 0; round < 6; round++ {
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			runFull() // dies with the server
		}()
		killAfter := time.Duration(100+r.IntN(1500)) * time.Millisecond
		time.Sleep(killAfter)
		srv.kill()
		wg.Wait()
		srv = startServer(t, spec)
		c = srv.client()
		rep := srv.recoveryReport()
		t.Logf("round %d: killed after %s; recovery %v; %d of %d objects compressed so far", round, killAfter, rep, compressedObjects(t, c, want), len(want))
		if rep["damaged"] != 0 || rep["missing"] != 0 {
			t.Errorf("round %d: recovery found damaged/missing replicas: %v", round, rep)
		}
		verify(fmt.Sprintf("round %d", round))
	}
	// Let the transforms finish: compress, then remove the emptied sources
	// and truncate dead tails.
	for i := 0; i < 4; i++ {
		rec, err := runFull()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("final job %d: done %v stale %v failed %v transformed %v dangling %v errors %v", i, rec["tasks_done"], rec["tasks_stale"],
			rec["tasks_failed"], rec["transformed"], rec["dangling"], rec["errors"])
		if d, ok := rec["dangling"]; ok && d != nil {
			t.Fatalf("dangling references: %v", d)
		}
	}
	verify("final")
	compressed, incompressible := 0, 0
	images := map[[2]uint64]bool{}
	for k := range want {
		var loc struct {
			Extents []struct {
				Transform string `json:"transform"`
				Egroup    uint64 `json:"egroup"`
				EgroupOff int64  `json:"egroup_offset"`
			} `json:"extents"`
		}
		if err := c.json("GET", "/v1/object/locate", url.Values{"bucket": {bucketOf(k)}, "key": {k}}, nil, &loc); err != nil {
			t.Fatal(err)
		}
		for _, x := range loc.Extents {
			switch {
			case strings.HasPrefix(x.Transform, "zstd"):
				compressed++
			case x.Transform == "incompressible":
				incompressible++
			}
		}
		if strings.HasPrefix(k, "logs/") && !strings.HasPrefix(loc.Extents[0].Transform, "zstd") {
			t.Errorf("%s: transform %q, want zstd", k, loc.Extents[0].Transform)
		}
		if strings.HasPrefix(k, "media/") && loc.Extents[0].Transform != "incompressible" {
			t.Errorf("%s: transform %q, want incompressible", k, loc.Extents[0].Transform)
		}
		if strings.HasPrefix(k, "images/") {
			for _, x := range loc.Extents {
				images[[2]uint64{x.Egroup, uint64(x.EgroupOff)}] = true
			}
		}
	}
	t.Logf("extents: %d compressed, %d in incompressible egroups; the 12 images are stored at %d places", compressed, incompressible, len(images))
	if len(images) > 2 {
		t.Errorf("12 images made of 2 contents (1 extent each) stored at %d places, want 2", len(images))
	}
	var rep struct {
		Tiers []struct {
			Tier         string           `json:"tier"`
			EgroupBytes  int64            `json:"egroup_bytes"`
			LogicalBytes int64            `json:"logical_bytes"`
			Savings      map[string]int64 `json:"savings"`
		} `json:"tiers"`
	}
	if err := c.json("GET", "/v1/tier/report", nil, nil, &rep); err != nil {
		t.Fatal(err)
	}
	for _, tu := range rep.Tiers {
		t.Logf("tier %s: physical %d logical %d savings %v", tu.Tier, tu.EgroupBytes, tu.LogicalBytes, tu.Savings)
		if tu.Tier == "hdd" && (tu.Savings["zstd"] == 0 || tu.EgroupBytes*2 > tu.LogicalBytes) {
			t.Errorf("hdd tier: physical %d of logical %d bytes; want compression to halve it", tu.EgroupBytes, tu.LogicalBytes)
		}
	}
	for _, args := range [][]string{{"tier", "report"}, {"curator", "history"}, {"object", "locate", "media/media/00.bin"}} {
		out, err := srv.cli(args...)
		if err != nil {
			t.Errorf("terrace %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("terrace %s:\n%s", strings.Join(args, " "), out)
	}
	out, err := srv.cli("bucket", "set-transform", "cold", "--compress", "snappy")
	if err == nil || !strings.Contains(out, "zstd or none") {
		t.Errorf("set-transform with a bad codec: %v\n%s", err, out)
	}
}

// compressedObjects counts objects whose first extent is stored compressed.
func compressedObjects(t *testing.T, c *client, want map[string][]byte) int {
	n := 0
	for k := range want {
		var loc struct {
			Extents []struct {
				Transform string `json:"transform"`
			} `json:"extents"`
		}
		b := "cold"
		if strings.HasPrefix(k, "media/") {
			b = "media"
		}
		if strings.HasPrefix(k, "images/") {
			continue
		}
		if err := c.json("GET", "/v1/object/locate", url.Values{"bucket": {b}, "key": {k}}, nil, &loc); err != nil {
			t.Fatal(err)
		}
		if len(loc.Extents) > 0 && strings.HasPrefix(loc.Extents[0].Transform, "zstd") {
			n++
		}
	}
	return n
}
