package e2e

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terrace-storage/terrace/internal/extent"
)

// TestAcceptance200Objects is the storage-core issue's "done when": a
// server with mem+ssd+hdd devices takes 200 objects of 1 KiB–8 MiB with
// vector ssd=1,hdd=1; `terrace object locate` shows every object on both
// tiers; `terrace tier report` agrees with the bytes written.
func TestAcceptance200Objects(t *testing.T) {
	dir := t.TempDir()
	spec := serverSpec{
		dataDir: filepath.Join(dir, "data"),
		devices: []string{
			"mem::256MiB",
			"ssd:" + filepath.Join(dir, "ssd0") + ":2GiB",
			"hdd:" + filepath.Join(dir, "hdd0") + ":4GiB",
			"hdd:" + filepath.Join(dir, "hdd1") + ":4GiB",
		},
		vector: "ssd=1,hdd=1",
	}
	s := startServer(t, spec)
	defer s.stop()
	c := s.client()
	if err := c.createBucket("accept", "ssd=1,hdd=1"); err != nil {
		t.Fatal(err)
	}
	var written, encoded int64
	keys := make([]string, 200)
	for i := range keys {
		keys[i] = fmt.Sprintf("obj/%03d", i)
		data := content(42, keys[i], 0, 1<<10, 8<<20)
		if err := c.put("accept", keys[i], data); err != nil {
			t.Fatalf("put %s: %v", keys[i], err)
		}
		written += int64(len(data))
		for n := int64(len(data)); n > 0; n -= 4 << 20 {
			encoded += extent.EncodedLen(min(n, 4<<20))
		}
	}
	for i, k := range keys {
		loc, err := c.locate("accept", k)
		if err != nil {
			t.Fatal(err)
		}
		if loc.Vector != "ssd=1,hdd=1" {
			t.Fatalf("%s: vector %q", k, loc.Vector)
		}
		for _, x := range loc.Extents {
			tiers := map[string]int{}
			for _, r := range x.Replicas {
				if !r.Bad {
					tiers[r.Tier]++
				}
			}
			if tiers["ssd"] != 1 || tiers["hdd"] != 1 {
				t.Fatalf("%s extent %d: replicas by tier %v, want ssd=1 hdd=1", k, x.Extent, tiers)
			}
		}
		got, err := c.get("accept", k)
		if err != nil || !bytes.Equal(got, content(42, k, 0, 1<<10, 8<<20)) {
			t.Fatalf("%s (%d): read back wrong (err %v)", k, i, err)
		}
	}
	// The CLI shows it too.
	out, err := s.cli("object", "locate", "accept/"+keys[7])
	if err != nil || !strings.Contains(out, "ssd") || !strings.Contains(out, "hdd") {
		t.Fatalf("terrace object locate: %v\n%s", err, out)
	}
	rep, err := c.report()
	if err != nil {
		t.Fatal(err)
	}
	byTier := map[string]int64{}
	used := map[string]int64{}
	for _, tu := range rep.Tiers {
		byTier[tu.Tier] = tu.EgroupBytes
		used[tu.Tier] = tu.UsedBytes
	}
	t.Logf("wrote %d payload bytes (%d encoded); report: ssd %d egroup bytes (%d used), hdd %d (%d used), mem %d",
		written, encoded, byTier["ssd"], used["ssd"], byTier["hdd"], used["hdd"], byTier["mem"])
	for _, tier := range []string{"ssd", "hdd"} {
		if byTier[tier] != encoded {
			t.Errorf("tier %s holds %d egroup bytes, want exactly the %d encoded bytes written", tier, byTier[tier], encoded)
		}
		// Used bytes on the medium: the egroups plus device identity files.
		if d := used[tier] - byTier[tier]; d < 0 || d > 1024 {
			t.Errorf("tier %s: used %d vs egroup bytes %d", tier, used[tier], byTier[tier])
		}
	}
	if byTier["mem"] != 0 {
		t.Errorf("mem tier holds %d bytes; the vector names no mem replica", byTier["mem"])
	}
	out, err = s.cli("tier", "report")
	if err != nil || !strings.Contains(out, "ssd") {
		t.Fatalf("terrace tier report: %v\n%s", err, out)
	}
}
