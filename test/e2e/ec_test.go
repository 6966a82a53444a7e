package e2e

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestCrashKill9DuringErasureCoding kills the server with SIGKILL at
// random moments while the Curator converts a cold any=3 bucket to 4+2
// stripes, and later while it rebuilds the strips of a device whose files
// were lost; after every restart every object must read back
// byte-identical with no damaged replica. At the end the bucket holds
// about 1.5x its size instead of 3x and every strip is good.
func TestCrashKill9DuringErasureCoding(t *testing.T) {
	if testing.Short() {
		t.Skip("kill -9 suite")
	}
	dir := t.TempDir()
	var devs []string
	for i := 0; i < 7; i++ {
		devs = append(devs, fmt.Sprintf("hdd:%s:8GiB", filepath.Join(dir, fmt.Sprintf("hdd%d", i))))
	}
	spec := serverSpec{
		dataDir: filepath.Join(dir, "data"),
		devices: devs,
		vector:  "any=3",
		config: `egroup_max_bytes: 1048576
curator:
  full_every: 1h
  partial_every: 1h
  garbage_grace: 1ms
  seal_idle: 1ms
  move_mbps: 6
  scrub: false
  transform:
    cold_after: 1ms
    hot_reads: 1000000
    hot_window: 1ms
    pack_bytes: 1048576
`,
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	srv := startServer(t, spec)
	c := srv.client()
	if err := c.createBucket("archive", "any=3"); err != nil {
		t.Fatal(err)
	}
	if err := c.json("POST", "/v1/buckets/archive/transform", url.Values{"ec": {"6+2"}}, nil, nil); err == nil || !strings.Contains(err.Error(), "8 distinct devices") {
		t.Fatalf("6+2 on 7 devices: %v, want a clear refusal", err)
	}
	if err := c.json("POST", "/v1/buckets/archive/transform", url.Values{"ec": {"4+2"}, "cold_after": {"1ms"}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 2))
	want := map[string][]byte{}
	var logical int64
	for i := 0; i < 40; i++ {
		k := fmt.Sprintf("blob/%03d", i)
		if i%2 == 0 {
			want[k] = content(seed, k, 0, 30_000, 500_000)
		} else {
			want[k] = transformText(seed, k, 30_000+r.IntN(400_000))
		}
		logical += int64(len(want[k]))
		if err := c.put("archive", k, want[k]); err != nil {
			t.Fatal(err)
		}
	}
	verify := func(when string) {
		t.Helper()
		for k, b := range want {
			got, err := c.get("archive", k)
			if err != nil || !bytes.Equal(got, b) {
				t.Fatalf("%s: %s: %d bytes, err %v; want %d\nlog:\n%s", when, k, len(got), err, len(b), tail(srv.log(), 3000))
			}
		}
	}
	run := func(kind string) (map[string]any, error) {
		var rec map[string]any
		err := c.json("POST", "/v1/curator/run", url.Values{"kind": {kind}, "wait": {"1"}}, nil, &rec)
		return rec, err
	}
	killRounds := func(kind string, rounds int) {
		for round := 0; round < rounds; round++ {
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				run(kind)
			}()
			killAfter := time.Duration(100+r.IntN(1200)) * time.Millisecond
			time.Sleep(killAfter)
			srv.kill()
			wg.Wait()
			srv = startServer(t, spec)
			c = srv.client()
			rep := srv.recoveryReport()
			t.Logf("%s round %d: killed after %s; recovery %v; %d of %d objects striped", kind, round, killAfter, rep, stripedObjects(t, c, want), len(want))
			if rep["damaged"] != 0 {
				t.Errorf("round %d: recovery found damaged replicas: %v", round, rep)
			}
			verify(fmt.Sprintf("%s round %d", kind, round))
		}
	}
	killRounds("full", 5)
	for i := 0; i < 3; i++ {
		rec, err := run("full")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("final encode job %d: done %v errors %v dangling %v", i, rec["tasks_done"], rec["errors"], rec["dangling"])
		if d := rec["dangling"]; d != nil {
			t.Fatalf("dangling references: %v", d)
		}
	}
	verify("encoded")
	if n := stripedObjects(t, c, want); n != len(want) {
		t.Fatalf("%d of %d objects striped", n, len(want))
	}
	var rep struct {
		Tiers []struct {
			EgroupBytes  int64            `json:"egroup_bytes"`
			LogicalBytes int64            `json:"logical_bytes"`
			Savings      map[string]int64 `json:"savings"`
		} `json:"tiers"`
	}
	if err := c.json("GET", "/v1/tier/report", nil, nil, &rep); err != nil {
		t.Fatal(err)
	}
	var phys int64
	for _, tu := range rep.Tiers {
		phys += tu.EgroupBytes
		t.Logf("tier: physical %d logical %d savings %v", tu.EgroupBytes, tu.LogicalBytes, tu.Savings)
	}
	if ratio := float64(phys) / float64(logical); ratio < 1.4 || ratio > 1.7 {
		t.Errorf("4+2 holds %.2fx the data, want about 1.5x", ratio)
	} else {
		t.Logf("4+2 holds %.2fx the data (any=3 held 3x)", ratio)
	}

	// Lose every strip file of one device, then kill the server while the
	// Curator rebuilds them.
	srv.stop()
	lostDev := filepath.Join(dir, "hdd2")
	n := 0
	filepath.Walk(lostDev, func(p string, info os.FileInfo, err error) error {
		if err == nil && strings.HasSuffix(p, ".eg") {
			os.Remove(p)
			n++
		}
		return nil
	})
	t.Logf("removed %d strip files of %s", n, lostDev)
	srv = startServer(t, spec)
	c = srv.client()
	t.Logf("recovery after losing the files: %v", srv.recoveryReport())
	verify("strips lost")
	killRounds("partial", 3)
	for i := 0; i < 2; i++ {
		rec, err := run("partial")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("final rebuild job %d: done %v errors %v", i, rec["tasks_done"], rec["errors"])
	}
	rec, err := run("full")
	if err != nil {
		t.Fatal(err)
	}
	if d := rec["dangling"]; d != nil {
		t.Fatalf("dangling references: %v", d)
	}
	var st struct {
		Devices []struct {
			ID          string `json:"ID"`
			BadReplicas int    `json:"bad_replicas"`
		} `json:"devices"`
	}
	if err := c.json("GET", "/v1/tier/report", nil, nil, &st); err != nil {
		t.Fatal(err)
	}
	for _, d := range st.Devices {
		if d.BadReplicas != 0 {
			t.Errorf("device %s still lists %d bad strips after the rebuild", d.ID, d.BadReplicas)
		}
	}
	verify("rebuilt")
	out, err := srv.cli("object", "locate", "archive/blob/000")
	if err != nil || !strings.Contains(out, "ec 4+2") {
		t.Errorf("terrace object locate: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// stripedObjects counts objects whose every extent is erasure coded.
func stripedObjects(t *testing.T, c *client, want map[string][]byte) int {
	n := 0
	for k := range want {
		var loc struct {
			Extents []struct {
				Transform string `json:"transform"`
			} `json:"extents"`
		}
		if err := c.json("GET", "/v1/object/locate", url.Values{"bucket": {"archive"}, "key": {k}}, nil, &loc); err != nil {
			t.Fatal(err)
		}
		all := len(loc.Extents) > 0
		for _, x := range loc.Extents {
			if !strings.Contains(x.Transform, "ec 4+2") {
				all = false
			}
		}
		if all {
			n++
		}
	}
	return n
}
